"""deploy/grafana/skyrl-runtime.json (ctest grafana_dashboard): a dashboard Grafana can import,
whose every query names metrics the daemons export.

- Shape: panels with unique ids, a grid position inside the 24 columns, a Prometheus
  datasource through the dashboard's variable, and at least one query each (rows excepted).
- Queries: parentheses, braces and brackets balance; every skyrl_* name (histograms by their
  _bucket, _count or _sum series) is a family some daemon defines in runtime/, and every
  label a query matches on is one that family carries or that Prometheus adds.
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "skyrl-runtime.json")
NAME = re.compile(r"\bskyrl_[a-z_]+")
MATCHER = re.compile(r"([a-zA-Z_]+)\s*(?:=~|!~|!=|=)\s*\"")
# Labels Prometheus adds to every scraped series, and those /metrics/targets gives each target.
TARGET_LABELS = {"job", "instance", "le", "skyrl_role", "skyrl_node_id", "skyrl_hostname"}


def exported_families():
    """Every "skyrl_..." string literal in the daemons' sources."""
    names = set()
    for base, _, files in os.walk(os.path.join(ROOT, "runtime")):
        for f in files:
            if f.endswith((".cc", ".h")):
                with open(os.path.join(base, f), encoding="utf-8") as src:
                    names.update(re.findall(r'"(skyrl_[a-z_]+)"', src.read()))
    return names


def labels_in_sources():
    """Every label name used in the sources' metric label lists ({"name", value}), and the
    name and outcome labels given to metrics::LatencyFamilies."""
    found = set()
    for sub in ("head", "worker", "metrics", "rpc"):
        for base, _, files in os.walk(os.path.join(ROOT, "runtime", sub)):
            for f in files:
                if f.endswith(".cc"):
                    with open(os.path.join(base, f), encoding="utf-8") as src:
                        text = src.read()
                    found.update(re.findall(r'\{\{?"([a-z_]+)",', text))
                    # metrics::LatencyFamilies(..., name_label, outcome_label)
                    found.update(re.findall(r'"([a-z_]+)",\s*"(?:code)"\)', text))
    return found


def family_of(name, families):
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return name if name in families else None


def balanced(expr):
    pairs, stack, in_string = {")": "(", "}": "{", "]": "["}, [], False
    for c in expr:
        if c == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif c in "({[":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return False
    return not stack and not in_string


def check(dashboard):
    errors = []
    families = exported_families()
    labels = labels_in_sources() | TARGET_LABELS
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    if "datasource" not in variables:
        errors.append("no datasource variable: the dashboard cannot be pointed at a Prometheus")
    ids = [p.get("id") for p in dashboard["panels"]]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append(f"panel ids not unique: {ids}")
    for p in dashboard["panels"]:
        where = f"panel {p.get('id')} {p.get('title')!r}"
        g = p.get("gridPos", {})
        if not (0 <= g.get("x", -1) and g.get("x", 0) + g.get("w", 0) <= 24 and g.get("h", 0) > 0):
            errors.append(f"{where}: gridPos {g} outside the 24 columns")
        if p["type"] == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f"{where}: datasource is not the dashboard's variable")
        if not p.get("targets"):
            errors.append(f"{where}: no query")
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            if not balanced(expr):
                errors.append(f"{where}: unbalanced query {expr!r}")
            names = NAME.findall(expr)
            if not names:
                errors.append(f"{where}: query names no skyrl_ metric: {expr!r}")
            for n in names:
                if family_of(n, families) is None:
                    errors.append(f"{where}: {n} is not exported by any daemon")
            for label in MATCHER.findall(expr):
                if label not in labels:
                    errors.append(f"{where}: label {label!r} is on no skyrl series")
            for label in re.findall(r"\{\{(\w+)\}\}", t.get("legendFormat", "")):
                if label not in labels:
                    errors.append(f"{where}: legend label {label!r} is on no skyrl series")
    return errors


def main():
    with open(DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)
    errors = check(dashboard)
    # The checks bite: a misspelt metric and a label no series has are both caught.
    broken = json.loads(json.dumps(dashboard))
    broken["panels"][1]["targets"][0]["expr"] = 'sum(skyrl_actor_callz_total{jobb="x"})'
    caught = check(broken)
    if not any("skyrl_actor_callz_total" in e for e in caught) or not any("'jobb'" in e for e in caught):
        errors.append(f"the checks missed a broken query: {caught}")
    for e in errors:
        print(f"FAIL: {e}")
    if errors:
        return 1
    print(f"PASS: {len(dashboard['panels'])} panels, every query names exported metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
