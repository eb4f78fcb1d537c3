// Validates rendered Kubernetes manifests offline: every object against the Kubernetes schemas of
// the npm package kubernetes-models (plus a check for fields the schema does not know, which its
// validate() lets through), then the rules a real API server or the kubelet would enforce but a
// JSON schema cannot, then SkyRL's own deployment contract.
//
// Usage:
//   node k8s_validate.mjs --models DIR [--bin-dir DIR] [--external-secret NAME]...
//        [--render NAME:PROFILE:FILE]... [--expect-reject FILE]...
//   DIR: an npm prefix holding kubernetes-models@5 and yaml@2.
//   PROFILE: gpu-cluster | cpu-cluster | job (what the render must contain, see checkProfile).
//   --expect-reject FILE: FILE must be rejected, and every error must contain the text of its
//     "# expect: TEXT" line; this is how the test proves each rule bites. "# needs: BINARY"
//     skips the file (with a note) when that executable is not in --bin-dir.
// Exit status 0 when every render validates and every --expect-reject file is rejected for its
// stated reason; 1 otherwise, with one line per error naming the object.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = { models: null, binDir: null, externalSecrets: [], renders: [], rejects: [] };
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  const next = () => {
    if (i + 1 >= args.length) usage(`${a} needs a value`);
    return args[++i];
  };
  if (a === "--models") opt.models = next();
  else if (a === "--bin-dir") opt.binDir = next();
  else if (a === "--external-secret") opt.externalSecrets.push(next());
  else if (a === "--render") {
    const [name, profile, ...file] = next().split(":");
    if (!name || !["gpu-cluster", "cpu-cluster", "job"].includes(profile) || file.length === 0)
      usage(`--render wants NAME:gpu-cluster|cpu-cluster|job:FILE, got "${args[i]}"`);
    opt.renders.push({ name, profile, file: file.join(":") });
  } else if (a === "--expect-reject") opt.rejects.push(next());
  else usage(`unknown argument "${a}"`);
}
if (!opt.models) usage("--models is required");

function usage(msg) {
  console.error(`k8s_validate: ${msg}`);
  process.exit(2);
}

const modelsRoot = path.join(opt.models, "node_modules");
const YAML = await import(pathToFileURL(path.join(modelsRoot, "yaml/dist/index.js")).href);

// ---- schema validation through kubernetes-models ----

const moduleCache = new Map();
async function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  // "v1" -> kubernetes-models/v1, "apps/v1" -> kubernetes-models/apps/v1.
  if (!/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion)) return null;
  const file = path.join(modelsRoot, "kubernetes-models", apiVersion, "index.js");
  if (!moduleCache.has(file)) moduleCache.set(file, existsSync(file) ? await import(pathToFileURL(file).href) : null);
  const mod = moduleCache.get(file);
  return mod && typeof mod[kind] === "function" ? mod[kind] : null;
}

// Wraps obj so that every property the validator reads is recorded. The generated validators
// read each property their schema declares (and iterate maps), so a key never read is a key
// the schema does not have: a typo such as `replica:` that validate() alone accepts.
function track(obj, where, seen) {
  if (obj === null || typeof obj !== "object") return obj;
  const children = new Map();
  const read = new Set();
  seen.push({ where, obj, read });
  return new Proxy(obj, {
    get(target, key, receiver) {
      if (typeof key === "string") read.add(key);
      const value = Reflect.get(target, key, receiver);
      if (typeof key !== "string" || value === null || typeof value !== "object") return value;
      if (!children.has(key)) children.set(key, track(value, `${where}.${key}`, seen));
      return children.get(key);
    },
    has(target, key) {
      if (typeof key === "string") read.add(key);
      return Reflect.has(target, key);
    },
  });
}

// The Prometheus Operator's ServiceMonitor is a custom resource kubernetes-models has no schema
// for: its fields are checked here instead (the ones deploy/ uses; an unknown one is an error).
function serviceMonitorErrors(obj, all) {
  const errors = [];
  const known = (o, keys, where) => {
    for (const k of Object.keys(o ?? {})) if (!keys.includes(k)) errors.push(`schema: unknown field ${where}${k}`);
  };
  known(obj, ["apiVersion", "kind", "metadata", "spec"], "");
  const spec = obj.spec ?? {};
  known(spec, ["selector", "namespaceSelector", "endpoints", "jobLabel"], "spec.");
  const eps = spec.endpoints ?? [];
  if (!Array.isArray(eps) || eps.length === 0) errors.push("spec.endpoints: at least one endpoint");
  const services = all.filter((o) => o.kind === "Service" && labelsSelect(spec.selector, o.metadata?.labels ?? {}));
  if (services.length === 0) errors.push("spec.selector selects no Service of the render");
  for (const [i, ep] of (Array.isArray(eps) ? eps : []).entries()) {
    known(ep, ["port", "path", "interval", "scrapeTimeout", "scheme"], `spec.endpoints[${i}].`);
    if (typeof ep.port !== "string") errors.push(`spec.endpoints[${i}].port must name a Service port`);
    for (const svc of services)
      if (!(svc.spec?.ports ?? []).some((p) => p.name === ep.port))
        errors.push(`spec.endpoints[${i}].port "${ep.port}" is not a port of Service ${svc.metadata?.name}`);
  }
  return errors;
}

// matchLabels and In/NotIn/Exists matchExpressions, as a label selector reads them.
function labelsSelect(selector, labels) {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    if (e.operator === "In" && !(has && (e.values ?? []).includes(labels[e.key]))) return false;
    if (e.operator === "NotIn" && has && (e.values ?? []).includes(labels[e.key])) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

async function schemaErrors(obj, all) {
  if (obj.apiVersion === "monitoring.coreos.com/v1" && obj.kind === "ServiceMonitor") return serviceMonitorErrors(obj, all);
  const Model = await modelClass(obj.apiVersion, obj.kind);
  if (!Model) return [`no schema for apiVersion "${obj.apiVersion}" kind "${obj.kind}" in kubernetes-models`];
  const seen = [];
  try {
    // The model's own validate(), run on a tracking view of the object instead of the copy the
    // constructor would make.
    Model.prototype.validate.call(track(obj, "", seen));
  } catch (e) {
    return [`schema: ${e.message}`];
  }
  const errors = [];
  for (const { where, obj: o, read } of seen)
    for (const key of Object.keys(o)) if (!read.has(key)) errors.push(`schema: unknown field ${where.slice(1)}.${key}`.replace(": unknown field .", ": unknown field "));
  return errors;
}

// ---- rules the API server or kubelet enforce beyond the schema ----

// pkg/apis/core/validation: resourceFieldRef accepts these (and hugepages-*), nothing else, so
// an extended resource such as nvidia.com/gpu is refused (kubernetes/kubernetes#44552).
const DOWNWARD_RESOURCES = new Set([
  "limits.cpu", "limits.memory", "limits.ephemeral-storage",
  "requests.cpu", "requests.memory", "requests.ephemeral-storage",
]);
const WORKLOADS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"]);
const STANDARD_RESOURCES = new Set(["cpu", "memory", "ephemeral-storage"]);

function podTemplate(obj) {
  if (WORKLOADS.has(obj.kind)) return obj.spec?.template;
  if (obj.kind === "CronJob") return obj.spec?.jobTemplate?.spec?.template;
  if (obj.kind === "Pod") return obj;
  return null;
}

function allContainers(podSpec) {
  return [...(podSpec.initContainers ?? []), ...(podSpec.containers ?? [])];
}

function labelsMatch(selector, labels) {
  for (const [k, v] of Object.entries(selector?.matchLabels ?? {})) if (labels?.[k] !== v) return false;
  return true;
}

// `--flag` options a daemon accepts, from its own --help (null when the binary is absent).
const helpCache = new Map();
function knownFlags(binary) {
  if (!opt.binDir || !/^skyrl-(head|worker)$/.test(binary)) return null;
  if (!helpCache.has(binary)) {
    const exe = path.join(opt.binDir, binary);
    let flags = null;
    if (existsSync(exe)) {
      const help = execFileSync(exe, ["--help"], { encoding: "utf8", timeout: 10000 });
      flags = new Set(help.match(/--[a-z][a-z0-9-]*/g) ?? []);
    }
    helpCache.set(binary, flags);
  }
  return helpCache.get(binary);
}

function quantity(q) {
  // Enough of resource.Quantity for comparisons between our own manifests.
  if (typeof q === "number") return q;
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) return NaN;
  const mult = { m: 1e-3, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
}

function podRules(obj, all) {
  const errors = [];
  const tpl = podTemplate(obj);
  if (!tpl) return errors;
  const spec = tpl.spec ?? {};
  const podSec = spec.securityContext ?? {};
  if (obj.kind !== "Pod" && obj.kind !== "Job" && obj.kind !== "CronJob" && !labelsMatch(obj.spec?.selector, tpl.metadata?.labels))
    errors.push("spec.selector does not match the pod template's labels");
  if (obj.kind === "StatefulSet" && !all.some((o) => o.kind === "Service" && o.metadata?.name === obj.spec?.serviceName))
    errors.push(`spec.serviceName "${obj.spec?.serviceName}" names no Service in this render`);
  // Service links would put SKYRL_HEAD_PORT=tcp://... and friends into every pod: the
  // daemons' own variable prefix, for Services named skyrl-*.
  if (spec.enableServiceLinks !== false)
    errors.push("spec.template.spec.enableServiceLinks must be false (Services named skyrl-* would inject SKYRL_* variables)");
  if (spec.automountServiceAccountToken !== false)
    errors.push("spec.template.spec.automountServiceAccountToken must be false (no pod here talks to the API server)");
  const volumes = new Set([...(spec.volumes ?? []).map((v) => v.name),
    ...(obj.spec?.volumeClaimTemplates ?? []).map((v) => v.metadata?.name)]);
  const secrets = new Set([...all.filter((o) => o.kind === "Secret").map((o) => o.metadata?.name), ...opt.externalSecrets]);
  for (const v of spec.volumes ?? [])
    if (v.secret && !secrets.has(v.secret.secretName)) errors.push(`volume ${v.name}: Secret "${v.secret.secretName}" is not in this render`);
  for (const v of spec.volumes ?? [])
    if (v.hostPath) errors.push(`volume ${v.name}: hostPath is not allowed (restricted Pod Security)`);
  for (const c of allContainers(spec)) {
    const at = `container ${c.name}`;
    const sec = c.securityContext ?? {};
    // Non-root, the restricted Pod Security profile (which the namespace enforces).
    const nonRoot = sec.runAsNonRoot ?? podSec.runAsNonRoot;
    const uid = sec.runAsUser ?? podSec.runAsUser;
    if (nonRoot !== true) errors.push(`${at}: runAsNonRoot must be true`);
    if (uid === 0) errors.push(`${at}: runAsUser is 0 (root)`);
    if (sec.allowPrivilegeEscalation !== false) errors.push(`${at}: allowPrivilegeEscalation must be false`);
    if (sec.privileged) errors.push(`${at}: privileged`);
    if (!(sec.capabilities?.drop ?? []).includes("ALL")) errors.push(`${at}: capabilities.drop must include ALL`);
    if ((sec.capabilities?.add ?? []).length > 0) errors.push(`${at}: adds capabilities ${sec.capabilities.add.join(",")}`);
    if ((sec.seccompProfile ?? podSec.seccompProfile)?.type !== "RuntimeDefault")
      errors.push(`${at}: seccompProfile must be RuntimeDefault`);
    if (sec.readOnlyRootFilesystem !== true) errors.push(`${at}: readOnlyRootFilesystem must be true`);
    // Requests and limits, CPU and memory both; extended resources cannot be overcommitted.
    const req = c.resources?.requests ?? {}, lim = c.resources?.limits ?? {};
    for (const r of ["cpu", "memory"]) {
      if (req[r] === undefined) errors.push(`${at}: no resources.requests.${r}`);
      if (lim[r] === undefined) errors.push(`${at}: no resources.limits.${r}`);
      if (req[r] !== undefined && lim[r] !== undefined && quantity(req[r]) > quantity(lim[r]))
        errors.push(`${at}: requests.${r} ${req[r]} exceeds limits.${r} ${lim[r]}`);
    }
    for (const r of new Set([...Object.keys(req), ...Object.keys(lim)]))
      if (!STANDARD_RESOURCES.has(r) && !r.startsWith("hugepages-") && String(req[r] ?? lim[r]) !== String(lim[r] ?? req[r]))
        errors.push(`${at}: ${r} requests (${req[r]}) and limits (${lim[r]}) must be equal for an extended resource`);
      else if (!STANDARD_RESOURCES.has(r) && !r.startsWith("hugepages-") && lim[r] === undefined)
        errors.push(`${at}: extended resource ${r} needs a limit`);
    // Environment: downward API fields the API server accepts; $(VAR) references that resolve.
    const env = new Map();
    for (const e of c.env ?? []) {
      env.set(e.name, e);
      const rf = e.valueFrom?.resourceFieldRef;
      if (rf && !DOWNWARD_RESOURCES.has(rf.resource) && !/^(limits|requests)\.hugepages-/.test(rf.resource))
        errors.push(`${at}: env ${e.name}: resourceFieldRef.resource "${rf.resource}" is not supported by the downward API ` +
          `(only cpu, memory, ephemeral-storage and hugepages-*)`);
      if (rf?.containerName && rf.containerName !== c.name)
        errors.push(`${at}: env ${e.name}: resourceFieldRef names container ${rf.containerName}`);
      const sk = e.valueFrom?.secretKeyRef;
      if (sk && !secrets.has(sk.name)) errors.push(`${at}: env ${e.name}: Secret "${sk.name}" is not in this render`);
    }
    for (const word of [...(c.command ?? []), ...(c.args ?? [])])
      for (const [, name] of String(word).matchAll(/(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g))
        if (!env.has(name)) errors.push(`${at}: $(${name}) in the command line is no env var of the container (the kubelet would pass it literally)`);
    for (const m of c.volumeMounts ?? [])
      if (!volumes.has(m.name)) errors.push(`${at}: volumeMount ${m.name} names no volume`);
    // Probes: a named port must be a port of the container.
    const ports = new Set((c.ports ?? []).map((p) => p.name).filter(Boolean));
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const p = c[probe];
      const port = p?.tcpSocket?.port ?? p?.httpGet?.port;
      if (typeof port === "string" && !ports.has(port)) errors.push(`${at}: ${probe} port "${port}" is not a named port`);
    }
    // Flags of our daemons must exist: compare with the binary's own --help.
    const argv = [...(c.command ?? []), ...(c.args ?? [])];
    const flags = knownFlags(argv[0]);
    if (flags)
      for (const word of argv.slice(1))
        if (/^--[a-z]/.test(word) && !flags.has(word.split("=")[0]))
          errors.push(`${at}: ${argv[0]} has no flag ${word.split("=")[0]} (see ${argv[0]} --help)`);
    errors.push(...workerRules(c, at));
  }
  return errors;
}

// The SkyRL worker offers what its container is given: GPU=$(SKYRL_WORKER_GPUS), and that
// variable must equal the nvidia.com/gpu limit (0 without one), since the downward API cannot
// carry extended resources.
function workerRules(c, at) {
  const argv = [...(c.command ?? []), ...(c.args ?? [])];
  if (argv[0] !== "skyrl-worker") return [];
  const errors = [];
  const i = argv.indexOf("--resources");
  const resources = i >= 0 ? String(argv[i + 1] ?? "") : "";
  if (!resources.split(",").includes("GPU=$(SKYRL_WORKER_GPUS)"))
    errors.push(`${at}: skyrl-worker --resources must contain GPU=$(SKYRL_WORKER_GPUS), got "${resources}"`);
  const gpus = (c.env ?? []).find((e) => e.name === "SKYRL_WORKER_GPUS");
  const limit = String(c.resources?.limits?.["nvidia.com/gpu"] ?? "0");
  if (!gpus || gpus.valueFrom || String(gpus.value) !== limit)
    errors.push(`${at}: env SKYRL_WORKER_GPUS (${gpus ? JSON.stringify(gpus.value ?? gpus.valueFrom) : "missing"}) ` +
      `must equal limits["nvidia.com/gpu"] (${limit})`);
  for (const [flag, wanted] of [["--bind", "0.0.0.0"], ["--node-ip", "$(POD_IP)"]])
    if (argv[argv.indexOf(flag) + 1] !== wanted || !argv.includes(flag))
      errors.push(`${at}: skyrl-worker needs ${flag} ${wanted} in a pod`);
  return errors;
}

function serviceRules(obj, all) {
  if (obj.kind !== "Service") return [];
  const errors = [];
  const pods = all.map((o) => ({ o, tpl: podTemplate(o) })).filter(({ tpl }) => tpl && obj.spec?.selector &&
    Object.entries(obj.spec.selector).every(([k, v]) => tpl.metadata?.labels?.[k] === v));
  if (pods.length === 0) return [`selector ${JSON.stringify(obj.spec?.selector)} matches no pod template in this render`];
  for (const p of obj.spec?.ports ?? [])
    if (typeof p.targetPort === "string" &&
        !pods.some(({ tpl }) => allContainers(tpl.spec).some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort))))
      errors.push(`port ${p.name}: targetPort "${p.targetPort}" is no named port of the selected pods`);
  return errors;
}

// ---- what each render must contain ----

function find(all, kind, name) {
  return all.find((o) => o.kind === kind && o.metadata?.name === name);
}

function checkProfile(all, profile, text) {
  const errors = [];
  const need = (cond, msg) => { if (!cond) errors.push(msg); };
  if (profile === "job") {
    const jobs = all.filter((o) => o.kind === "Job");
    need(jobs.length > 0, "no Job in the render");
    for (const j of jobs) {
      const argv = j.spec?.template?.spec?.containers?.[0]?.args ?? [];
      need(argv[0] === "skyrl" && argv.includes("job") && argv.includes("submit") && argv.includes("--address") &&
        argv.includes("--"), `Job ${j.metadata?.name}: must run "skyrl job submit --address HOST:PORT -- CMD..."`);
    }
    return errors;
  }
  need(find(all, "Namespace", "skyrl"), "no Namespace skyrl");
  for (const s of ["skyrl-token", "skyrl-redis"]) need(find(all, "Secret", s), `no Secret ${s}`);
  const head = find(all, "Deployment", "skyrl-head");
  need(head, "no Deployment skyrl-head");
  if (head) {
    need(head.spec.replicas === 1, "Deployment skyrl-head: replicas must be 1");
    need(head.spec.strategy?.type === "Recreate", "Deployment skyrl-head: strategy must be Recreate (never two heads)");
    const c = head.spec.template.spec.containers[0];
    const argv = c.args ?? [];
    need(argv[argv.indexOf("--bind") + 1] === "0.0.0.0" && argv.includes("--bind"), "skyrl-head must --bind 0.0.0.0 in a pod");
    need((argv[argv.indexOf("--store") + 1] ?? "").startsWith("redis://") && argv.includes("--store"), "skyrl-head must use a redis:// store");
    need(argv.includes("--token-file"), "skyrl-head must read --token-file");
    for (const p of ["readinessProbe", "livenessProbe"]) need(c[p]?.grpc?.port === 7420, `skyrl-head ${p} must be a grpc probe on 7420`);
  }
  need(find(all, "Service", "skyrl-head"), "no Service skyrl-head");
  // Each daemon serves /metrics on the named port its --metrics-port says, and its pods say so
  // to a Prometheus that discovers them by annotation.
  const worker0 = find(all, "StatefulSet", "skyrl-worker") ?? find(all, "DaemonSet", "skyrl-worker");
  for (const [what, wl] of [["skyrl-head", head], ["skyrl-worker", worker0]]) {
    if (!wl) continue;
    const c = wl.spec.template.spec.containers[0];
    const argv = c.args ?? [];
    const port = Number(argv[argv.indexOf("--metrics-port") + 1]);
    need(argv.includes("--metrics-port") && port > 0, `${what} must serve --metrics-port on a fixed port`);
    need((c.ports ?? []).some((p) => p.name === "metrics" && p.containerPort === port),
      `${what}: no container port "metrics" equal to its --metrics-port`);
    const ann = wl.spec.template.metadata?.annotations ?? {};
    need(ann["prometheus.io/scrape"] === "true" && Number(ann["prometheus.io/port"]) === port,
      `${what}: pod annotations prometheus.io/scrape and prometheus.io/port must name its metrics port`);
  }
  const redis = find(all, "StatefulSet", "skyrl-redis");
  need(redis, "no StatefulSet skyrl-redis");
  if (redis) {
    const argv = redis.spec.template.spec.containers[0].args ?? [];
    need(argv[argv.indexOf("--appendonly") + 1] === "yes", "skyrl-redis must run with --appendonly yes");
    need((redis.spec.volumeClaimTemplates ?? []).length > 0, "skyrl-redis needs a persistent volume claim");
  }
  need(find(all, "Service", "skyrl-redis"), "no Service skyrl-redis");
  const worker = find(all, "StatefulSet", "skyrl-worker") ?? find(all, "DaemonSet", "skyrl-worker");
  need(worker, "no StatefulSet or DaemonSet skyrl-worker");
  if (worker) {
    const gpus = Number(worker.spec.template.spec.containers[0].resources?.limits?.["nvidia.com/gpu"] ?? 0);
    if (profile === "gpu-cluster") need(gpus > 0, "skyrl-worker requests no nvidia.com/gpu");
  }
  if (profile === "cpu-cluster") need(!text.includes("nvidia.com/gpu"), "a CPU-only render mentions nvidia.com/gpu");
  return errors;
}

// ---- driver ----

async function validateText(text) {
  const errors = [];
  const docs = YAML.parseAllDocuments(text);
  const all = [];
  for (const d of docs) {
    if (d.errors.length) errors.push(`YAML: ${d.errors[0].message}`);
    const o = d.toJS();
    // kustomize wraps long base64 Secret values over lines; the API server decodes with Go's
    // base64, which skips \r and \n, while the schema's "byte" format does not.
    if (o?.kind === "Secret" && o.data && typeof o.data === "object")
      for (const k of Object.keys(o.data)) if (typeof o.data[k] === "string") o.data[k] = o.data[k].replace(/[\r\n]/g, "");
    if (o !== null && o !== undefined) all.push(o);
  }
  for (const o of all) {
    const id = `${o?.kind ?? "?"} ${o?.metadata?.namespace ? o.metadata.namespace + "/" : ""}${o?.metadata?.name ?? "?"}`;
    const add = (list) => list.forEach((e) => errors.push(`${id}: ${e}`));
    if (typeof o !== "object" || Array.isArray(o)) { errors.push(`not an object: ${JSON.stringify(o).slice(0, 80)}`); continue; }
    add(await schemaErrors(o, all));
    if (!o.metadata?.name) add(["metadata.name is missing"]);
    if (o.kind !== "Namespace" && !o.metadata?.namespace) add(["metadata.namespace is missing (kustomize sets it)"]);
    add(podRules(o, all));
    add(serviceRules(o, all));
  }
  return { errors, all };
}

let failed = false;
for (const r of opt.renders) {
  const text = readFileSync(r.file, "utf8");
  const { errors, all } = await validateText(text);
  errors.push(...checkProfile(all, r.profile, text));
  if (all.length === 0) errors.push("the render is empty");
  if (errors.length) {
    failed = true;
    for (const e of errors) console.log(`FAIL ${r.name}: ${e}`);
  } else {
    console.log(`ok   ${r.name}: ${all.length} objects valid (${[...new Set(all.map((o) => o.kind))].sort().join(", ")})`);
  }
}
for (const file of opt.rejects) {
  const text = readFileSync(file, "utf8");
  const expect = /^# expect: (.+)$/m.exec(text)?.[1]?.trim();
  const needs = /^# needs: (.+)$/m.exec(text)?.[1]?.trim();
  const name = path.basename(file);
  if (!expect) { failed = true; console.log(`FAIL ${name}: no "# expect: TEXT" line`); continue; }
  if (needs && !(opt.binDir && existsSync(path.join(opt.binDir, needs)))) {
    console.log(`skip ${name}: needs ${needs}, not built`);
    continue;
  }
  // Every error must be the expected one: a fixture that fails for another reason as well would
  // not prove that this rule bites.
  const { errors } = await validateText(text);
  const others = errors.filter((e) => !e.includes(expect));
  if (errors.length > 0 && others.length === 0) console.log(`ok   ${name}: rejected: ${errors[0]}`);
  else {
    failed = true;
    console.log(`FAIL ${name}: expected only errors containing "${expect}", got ${errors.length ? errors.join(" | ") : "none"}`);
  }
}
process.exit(failed ? 1 : 0);
