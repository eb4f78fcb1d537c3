// Runs the containers of a rendered SkyRL overlay as local processes, the way a kubelet would
// start them, to prove the manifests' command lines work with the real daemons: Redis with the
// password and append-only file, the head reaching it through the redis:// URL with the password
// from the Secret, the worker offering exactly its container limits. Probes are the manifests'
// own: the head's gRPC health check (spoken over HTTP/2 here, with no token, as the kubelet
// does), the worker's TCP check, Redis's exec check.
//
// What is emulated, and only this: env (value, secretKeyRef, fieldRef status.podIP = 127.0.0.1,
// resourceFieldRef of the container's limits) and $(VAR) expansion as the kubelet does them;
// volume mount paths become temporary directories; container ports become free local ports and
// the Services' DNS names (skyrl-redis, skyrl-head) become 127.0.0.1 with those ports.
//
// Usage: node pods_local.mjs --models DIR --bin-dir DIR --render FILE --work DIR
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
// Optional --gpu-render FILE: the GPU overlay, whose worker must refuse to start on a machine
// with fewer GPUs than its limit says (checked only there).
for (const k of ["models", "bin-dir", "render", "work"]) if (!opt[k]) { console.error(`pods_local: --${k} is required`); process.exit(2); }
opt["bin-dir"] = path.resolve(opt["bin-dir"]);
opt.work = path.resolve(opt.work);
const YAML = await import(pathToFileURL(path.join(opt.models, "node_modules/yaml/dist/index.js")).href);
const objects = YAML.parseAllDocuments(readFileSync(opt.render, "utf8")).map((d) => d.toJS()).filter(Boolean);

const children = [];
let failed = false;
function fail(msg) {
  console.log(`FAIL: ${msg}`);
  failed = true;
  throw new Error(msg);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

function quantity(q) {
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) fail(`cannot read quantity "${q}"`);
  const mult = { m: 1e-3, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
}

function secretValue(name, key) {
  const s = objects.find((o) => o.kind === "Secret" && o.metadata.name === name);
  if (!s || !(key in (s.data ?? {}))) fail(`Secret ${name} has no key ${key}`);
  return Buffer.from(String(s.data[key]).replace(/\s/g, ""), "base64").toString("utf8");
}

// The kubelet's $(VAR) expansion: defined names are replaced, $$ escapes, others stay literal.
function expand(s, env) {
  return String(s).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) =>
    m === "$$" ? "$" : name in env ? env[name] : m);
}

// ports[service name] = { port in the manifest -> local port }, filled before anything starts.
const localPort = new Map();
async function portFor(containerPort) {
  if (!localPort.has(containerPort)) localPort.set(containerPort, await freePort());
  return localPort.get(containerPort);
}

async function prepare(workload) {
  const podSpec = workload.spec.template.spec;
  const c = podSpec.containers[0];
  const name = workload.metadata.name;
  const root = path.join(opt.work, name);
  // Volumes: a directory each; Secret volumes get their keys as files.
  const volumeDir = new Map();
  for (const v of [...(podSpec.volumes ?? []), ...(workload.spec.volumeClaimTemplates ?? []).map((t) => ({ name: t.metadata.name }))]) {
    const dir = path.join(root, "volumes", v.name);
    mkdirSync(dir, { recursive: true });
    if (v.secret) {
      const s = objects.find((o) => o.kind === "Secret" && o.metadata.name === v.secret.secretName);
      for (const key of Object.keys(s.data)) {
        writeFileSync(path.join(dir, key), secretValue(v.secret.secretName, key));
        chmodSync(path.join(dir, key), v.secret.defaultMode ?? 0o644);
      }
    }
    volumeDir.set(v.name, dir);
  }
  const mounts = (c.volumeMounts ?? []).map((m) => ({ from: m.mountPath, to: volumeDir.get(m.name) }))
    .sort((a, b) => b.from.length - a.from.length);
  const remapPath = (word) => {
    for (const m of mounts) if (word === m.from || word.startsWith(m.from + "/")) return m.to + word.slice(m.from.length);
    return word;
  };
  // Env as the kubelet computes it.
  const env = {};
  for (const e of c.env ?? []) {
    if ("value" in e) env[e.name] = expand(e.value, env);
    else if (e.valueFrom?.secretKeyRef) env[e.name] = secretValue(e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key);
    else if (e.valueFrom?.fieldRef?.fieldPath === "status.podIP") env[e.name] = "127.0.0.1";
    else if (e.valueFrom?.resourceFieldRef) {
      const rf = e.valueFrom.resourceFieldRef;
      const [kind, res] = rf.resource.split(".");
      const q = c.resources?.[kind]?.[res];
      if (q === undefined) fail(`${name}: env ${e.name} reads ${rf.resource}, which the container does not set`);
      // The kubelet rounds up to whole divisors.
      env[e.name] = String(Math.ceil(quantity(q) / quantity(rf.divisor ?? "1")));
    } else fail(`${name}: env ${e.name}: a source this emulation does not know`);
  }
  const homeMount = mounts.find((m) => m.from === "/home/skyrl");
  const tmpMount = mounts.find((m) => m.from === "/tmp");
  const procEnv = { PATH: `${opt["bin-dir"]}:${process.env.PATH}`, HOME: homeMount?.to ?? path.join(root, "home"),
    TMPDIR: tmpMount?.to ?? path.join(root, "tmp"), ...env };
  return { name, c, env, procEnv, remapPath, root };
}

async function localArgv(p) {
  const words = [...(p.c.command ?? []), ...(p.c.args ?? [])].map((w) => expand(w, p.env));
  const out = [];
  for (let i = 0; i < words.length; ++i) {
    let w = p.remapPath(words[i]);
    // Ports and Service names: the manifest's fixed ports become free local ones.
    if (/^--(port|metrics-port|dashboard-port)$/.test(words[i - 1] ?? "")) w = String(await portFor(Number(w)));
    w = w.replace(/(skyrl-redis|skyrl-head):([0-9]+)/, (m, host, port) => `127.0.0.1:${localPort.get(Number(port))}`);
    out.push(w);
  }
  return out;
}

function start(p, argv) {
  const log = [];
  const child = spawn(argv[0], argv.slice(1), { env: p.procEnv, cwd: p.root, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (d) => log.push(d.toString()));
  child.stderr.on("data", (d) => log.push(d.toString()));
  child.exitInfo = null;
  child.on("exit", (code, signal) => { child.exitInfo = { code, signal }; });
  child.on("error", (e) => { child.exitInfo = { error: e.message }; });
  child.log = () => log.join("");
  child.label = p.name;
  children.push(child);
  // The driver script kills these pids if this process itself is killed (a ctest timeout).
  if (child.pid) appendFileSync(path.join(opt.work, "pids"), `${child.pid}\n`);
  const shown = argv.map((w, i) => (argv[i - 1] === "--requirepass" ? "<password>" : w.replace(/redis:\/\/:[^@]*@/, "redis://:<password>@")));
  console.log(`started ${p.name}: ${shown.join(" ")}`);
  return child;
}

// grpc.health.v1.Health/Check over h2c with an empty request, no token: what a Kubernetes grpc
// probe sends. SERVING is field 1 = 1 (bytes 08 01).
function grpcHealth(port) {
  return new Promise((resolve) => {
    const client = http2.connect(`http://127.0.0.1:${port}`);
    client.on("error", () => resolve(false));
    const req = client.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check",
      "content-type": "application/grpc", te: "trailers" });
    const chunks = [];
    let status = null;
    req.on("data", (d) => chunks.push(d));
    req.on("trailers", (t) => { status = t["grpc-status"]; });
    req.on("response", (h) => { if (h["grpc-status"] !== undefined) status = h["grpc-status"]; });
    req.on("error", () => { client.close(); resolve(false); });
    req.on("end", () => {
      client.close();
      const body = Buffer.concat(chunks);
      resolve(status === "0" && body.length === 7 && body[5] === 0x08 && body[6] === 0x01);
    });
    req.setTimeout(3000, () => { req.close(); client.close(); resolve(false); });
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

function tcpOpen(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => { s.destroy(); resolve(true); });
    s.once("error", () => resolve(false));
  });
}

async function probeUntil(what, child, probe, seconds) {
  for (const end = Date.now() + seconds * 1000; Date.now() < end;) {
    if (child.exitInfo) fail(`${child.label} exited (${JSON.stringify(child.exitInfo)}) before ${what}:\n${child.log()}`);
    if (await probe()) { console.log(`ok   ${child.label}: ${what}`); return; }
    await sleep(100);
  }
  fail(`${child.label}: ${what} not within ${seconds} s:\n${child.log()}`);
}

async function stop(child, graceSeconds) {
  if (child.exitInfo) return child.exitInfo;
  child.kill("SIGTERM");
  for (const end = Date.now() + graceSeconds * 1000; Date.now() < end && !child.exitInfo;) await sleep(50);
  if (!child.exitInfo) { child.kill("SIGKILL"); fail(`${child.label} outlived its ${graceSeconds} s grace period after SIGTERM`); }
  return child.exitInfo;
}

// The GPU overlay's worker, started as its pod would be, must exit at once with status 2 and say
// how many GPUs it found when the machine has fewer than its nvidia.com/gpu limit.
async function gpuWorkerRefuses(file) {
  const gpuObjects = YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
  const saved = objects.splice(0, objects.length, ...gpuObjects);
  try {
    const wl = get("StatefulSet", "skyrl-worker");
    const want = Number(wl.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]);
    const p = await prepare(wl);
    p.name = "skyrl-worker (gpu overlay)";
    const child = start(p, await localArgv(p));
    for (const end = Date.now() + 10000; Date.now() < end && !child.exitInfo;) await sleep(50);
    if (!child.exitInfo) {
      await stop(child, 30);
      console.log(`skip gpu overlay worker: this machine has at least ${want} GPUs, so it started`);
      return;
    }
    const m = /--resources: GPU=([0-9]+) but only ([0-9]+) detected/.exec(child.log());
    if (child.exitInfo.code !== 2 || !m || Number(m[1]) !== want)
      fail(`the gpu overlay's worker should exit 2 naming GPU=${want}; got ${JSON.stringify(child.exitInfo)}:\n${child.log()}`);
    console.log(`ok   gpu overlay worker refuses at once: ${m[0]}`);
  } finally {
    objects.splice(0, objects.length, ...saved);
  }
}

const get = (kind, name) => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) fail(`no ${kind} ${name} in the render`);
  return o;
};

try {
  const redisW = get("StatefulSet", "skyrl-redis"), headW = get("Deployment", "skyrl-head"), workerW = get("StatefulSet", "skyrl-worker");
  // Every Service port is allocated first, so each command line can name the others'.
  for (const svc of objects.filter((o) => o.kind === "Service")) for (const sp of svc.spec.ports) await portFor(sp.port);
  const redis = await prepare(redisW), head = await prepare(headW), worker = await prepare(workerW);

  // Redis, with the readiness probe's own exec command (redis-cli reads REDISCLI_AUTH).
  const redisArgv = await localArgv(redis);
  const redisPort = localPort.get(6379);
  const r = start(redis, redisArgv);
  const probe = redisW.spec.template.spec.containers[0].readinessProbe.exec.command;
  await probeUntil("readiness exec probe passes", r, async () =>
    spawnSync(probe[0], probe.slice(1).map((w) => w.replace("redis-cli", `redis-cli -p ${redisPort}`)),
      { env: redis.procEnv, encoding: "utf8" }).status === 0, 20);
  const noAuth = spawnSync("redis-cli", ["-p", String(redisPort), "ping"], { encoding: "utf8", env: { PATH: process.env.PATH } });
  if (!/NOAUTH/.test(noAuth.stdout + noAuth.stderr)) fail(`Redis answered without the password: ${noAuth.stdout}`);
  console.log("ok   skyrl-redis: refuses clients without the password");

  const h = start(head, await localArgv(head));
  const headPort = localPort.get(7420);
  await probeUntil("gRPC health probe SERVING (no token)", h, () => grpcHealth(headPort), 30);

  const w = start(worker, await localArgv(worker));
  const workerPort = localPort.get(7421);
  await probeUntil("TCP probe connects", w, () => tcpOpen(workerPort), 30);
  await probeUntil("registered with the head", w, async () => /registered with head/.test(w.log()), 30);
  // The worker offers exactly its container's limits: CPU and memory through the downward API,
  // GPU through SKYRL_WORKER_GPUS.
  const lim = workerW.spec.template.spec.containers[0].resources.limits;
  const line = /registered with head .* as (node-[0-9a-f]+): (.*) labels/.exec(w.log());
  const offered = Object.fromEntries(line[2].split(/[ ,]+/).filter(Boolean).map((kv) => kv.split("=")));
  const wantCpu = Math.ceil(quantity(lim.cpu)), wantMem = quantity(lim.memory), wantGpu = Number(lim["nvidia.com/gpu"] ?? 0);
  console.log(`     worker offers ${line[2]}; limits cpu=${lim.cpu} memory=${lim.memory} gpu=${wantGpu}`);
  const num = (v) => (v === undefined ? 0 : quantity(v));
  if (num(offered.CPU) !== wantCpu) fail(`worker offers CPU=${offered.CPU}, limit is ${wantCpu}`);
  if (num(offered.GPU) !== wantGpu) fail(`worker offers GPU=${offered.GPU}, limit is ${wantGpu}`);
  if (offered.memory !== undefined && Math.abs(num(offered.memory) - wantMem) > wantMem * 0.001)
    fail(`worker offers memory=${offered.memory}, limit is ${wantMem} bytes`);
  if (offered.memory === undefined) fail(`worker offers no memory: ${line[2]}`);
  console.log("ok   skyrl-worker: offers CPU, memory and GPU equal to its container limits");

  // Both serve Prometheus metrics on their named "metrics" ports.
  for (const [label, wl, want] of [["skyrl-head", headW, "skyrl_nodes"], ["skyrl-worker", workerW, "skyrl_worker_actor_processes"]]) {
    const port = localPort.get(wl.spec.template.spec.containers[0].ports.find((p) => p.name === "metrics").containerPort);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    const body = await res.text();
    if (res.status !== 200 || !body.includes(want)) fail(`${label}: GET /metrics answered ${res.status}: ${body.slice(0, 200)}`);
    console.log(`ok   ${label}: serves /metrics on its metrics port`);
  }

  // The node is in Redis: the head wrote through the password-protected URL.
  const nodes = spawnSync("redis-cli", ["-p", String(redisPort), "--no-auth-warning", "hkeys", "skyrl:default:nodes"],
    { encoding: "utf8", env: { PATH: process.env.PATH, REDISCLI_AUTH: redis.env.REDIS_PASSWORD } });
  if (!nodes.stdout.includes(line[1])) fail(`node ${line[1]} is not in Redis (skyrl:default:nodes): ${nodes.stdout}${nodes.stderr}`);
  console.log(`ok   skyrl-head: node ${line[1]} recorded in Redis`);

  // Shutdown as Kubernetes does it: SIGTERM, then the pod's grace period.
  const grace = (wl) => wl.spec.template.spec.terminationGracePeriodSeconds ?? 30;
  for (const [child, wl] of [[w, workerW], [h, headW], [r, redisW]]) {
    const exit = await stop(child, grace(wl));
    if (exit.code !== 0) fail(`${child.label} exited with ${JSON.stringify(exit)} after SIGTERM:\n${child.log()}`);
    console.log(`ok   ${child.label}: exits 0 on SIGTERM within ${grace(wl)} s`);
  }
  if (!/unregister|leaving the cluster/.test(w.log())) fail(`the worker did not leave the cluster on SIGTERM:\n${w.log()}`);
  // Secrets never reach a log: the head prints its store without the password.
  const secrets = { token: secretValue("skyrl-token", "token"), "Redis password": redis.env.REDIS_PASSWORD };
  for (const child of [r, h, w])
    for (const [what, value] of Object.entries(secrets))
      if (child.log().includes(value)) fail(`${child.label}'s log contains the ${what}`);
  console.log("ok   no log contains the token or the Redis password");
  const data = path.join(opt.work, "skyrl-redis", "volumes", "data");
  if (!readdirSync(data).some((f) => f.startsWith("appendonly"))) fail(`no append-only file in Redis's data volume: ${readdirSync(data)}`);
  console.log("ok   skyrl-redis: append-only file on the data volume");
  if (opt["gpu-render"]) await gpuWorkerRefuses(opt["gpu-render"]);
} catch (e) {
  if (!failed) console.log(`FAIL: ${e.stack}`);
  failed = true;
} finally {
  for (const c of children) if (!c.exitInfo) c.kill("SIGKILL");
}
for (const end = Date.now() + 5000; Date.now() < end && children.some((c) => !c.exitInfo);) await sleep(50);
// Every child is reaped: their pids may be reused now, so the driver must not kill them.
if (children.every((c) => c.exitInfo)) rmSync(path.join(opt.work, "pids"), { force: true });
process.exit(failed ? 1 : 0);
