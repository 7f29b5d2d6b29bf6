#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The queries of a Grafana dashboard (deploy/grafana/sluice.json), for
tests/integration/test_dashboard.sh.

  dashboard.py rules DASHBOARD RULES_YML   every PromQL expression (panel
      targets, and the selectors of label_values() variables), Grafana's
      variables replaced by valid values, as Prometheus recording rules
      for `promtool check rules`; prints how many
  dashboard.py names DASHBOARD             the metric names they use, one
      a line
  dashboard.py docs METRICS_MD             the metric names docs/metrics.md
      documents (a histogram's _bucket, _sum and _count too)
  dashboard.py scrape FILE                 the sample names of a scrape

Problems (a panel without an id or a datasource, a target without an
expression, an undefined variable) are printed and exit 1.
"""
import json
import re
import sys

# Grafana's own variables: a range in PromQL's duration syntax will do
BUILTIN = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
VAR_RE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
TOKEN_RE = re.compile(r'''\s+|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`'''
                      r'''|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*'''
                      r'''|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[a-z]*|.''')
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# aggregations: "sum by (rule) (...)" puts a clause before the "("
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar",
                "count", "count_values", "bottomk", "topk", "quantile",
                "limitk", "limit_ratio"}
KEYWORDS = GROUPING | AGGREGATIONS | {"bool", "and", "or", "unless",
                                      "offset", "atan2", "inf", "nan"}
problems = []


def panels(d):
    for p in d.get("panels", []):
        yield p
        yield from panels(p)  # a collapsed row holds its panels


def queries(d):
    """(where, PromQL) of every target and of every label_values()"""
    ids = set()
    for p in panels(d):
        where = "panel %s (%s)" % (p.get("id"), p.get("title"))
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            problems.append(where + ": no id of its own")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            problems.append(where + ": no gridPos")
        if p.get("type") == "row":
            continue
        if not p.get("datasource") or not p.get("targets"):
            problems.append(where + ": no datasource or no targets")
        for t in p.get("targets", []):
            if not t.get("expr") or not t.get("refId"):
                problems.append(where + ": a target without expr or refId")
                continue
            yield "%s %s" % (where, t["refId"]), t["expr"]
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
        if not m:
            problems.append("variable %s: not label_values(SELECTOR, "
                            "LABEL): %s" % (v["name"], q))
            continue
        yield "variable " + v["name"], m.group(1)


def substitute(d, expr, where):
    defined = {v["name"] for v in d.get("templating", {}).get("list", [])}

    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in BUILTIN:
            return BUILTIN[name]
        if name not in defined:
            problems.append("%s: undefined variable $%s" % (where, name))
        return ".*"  # the value "All" stands for in a =~ matcher
    return VAR_RE.sub(one, expr)


def metric_names(expr):
    toks = [t for t in TOKEN_RE.findall(expr) if not t.isspace()]
    names, brace, i = set(), 0, 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t == "{":
            brace += 1
        elif t == "}":
            brace -= 1
        elif brace or not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", t):
            pass
        elif t in GROUPING and nxt == "(":
            i = toks.index(")", i)  # a list of labels
        elif t in KEYWORDS or nxt == "(":
            pass  # a keyword, a function or an aggregation
        else:
            names.add(t)
        i += 1
    return names


def doc_names(path):
    names = set()
    for line in open(path):
        m = re.match(r"\|\s*`([a-z_:][a-z0-9_:]*)`\s*\|\s*(\w+)", line)
        if not m:
            continue
        names.add(m.group(1))
        if m.group(2) == "histogram":
            names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
    return names


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "docs":
        print("\n".join(sorted(doc_names(path))))
        return 0
    if mode == "scrape":
        print("\n".join(sorted({re.split(r"[{ ]", l, 1)[0]
                                for l in open(path)
                                if l.strip() and not l.startswith("#")})))
        return 0
    d = json.load(open(path))
    qs = [(w, substitute(d, e, w)) for w, e in queries(d)]
    if mode == "rules":
        rules = [{"record": "dashboard:query_%d" % i, "expr": e}
                 for i, (w, e) in enumerate(qs)]
        # JSON is YAML: no quoting to get wrong
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]},
                  open(sys.argv[3], "w"), indent=1)
        print(len(rules))
    elif mode == "names":
        print("\n".join(sorted(set().union(*(metric_names(e)
                                              for _, e in qs)))))
    for p in problems:
        print("problem: " + p, file=sys.stderr)
    return 1 if problems else 0


sys.exit(main())
