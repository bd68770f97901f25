#!/usr/bin/env python3
"""A small MCP stdio server (stdlib only) that runs tools as tasks (MCP 2025-11-25,
basic/utilities/tasks), for tests/it/upstream_tasks.rs (issue 33, section 4).

Usage: tasks.py NAME   (NAME: the upstream name the policy gives it; its answers say it)

Env: RECORD, a file every line it reads is appended to (what reached it); SECRET, the
credential it was given (its answers echo it); NO_TASKS set: it declares no tasks
capability (and runs every call at once).

A task's ttl is the one asked for, at most 60000 ms (60000 when none was asked).

Tools:
  slow    execution.taskSupport "optional": as a task, "working" at the first tasks/get
          (its statusMessage echoes SECRET), "completed" from the second on; its result
          is "slow done by NAME, token=SECRET"
  must    execution.taskSupport "required"
  plain   no execution member (forbidden): always answered at once
  crash   exits at once (its tasks are lost with it)
  quick   execution.taskSupport "optional": its tasks are completed from the start
  lazy    execution.taskSupport "optional": answers the task-augmented call only after
          LAZY seconds (default 0.5), whatever came meanwhile (a notifications/cancelled
          too): the task it creates is one nobody waits for any more
  note    execution.taskSupport "optional": its tasks are completed from the start, and
          a notifications/tasks/status saying so follows the CreateTaskResult
Env FLIP: a file; while it exists, "plain" is listed with execution.taskSupport
"optional" (a tool flipped after it was pinned).
Task ids are predictable on purpose ("t1", "t2", ...): the same ids in two upstreams, so
a test can try to reach one upstream's task with another's id.
"""
import json
import os
import sys
import time

NAME = sys.argv[1] if len(sys.argv) > 1 else "fixture"
SECRET = os.environ.get("SECRET", "")
RECORD = os.environ.get("RECORD")
TASKS = not os.environ.get("NO_TASKS")
FLIP = os.environ.get("FLIP")
LAZY = float(os.environ.get("LAZY", "0.5"))

CREATED = "2025-11-25T10:30:00Z"
tasks = {}  # id -> {"polls": n, "status": s, "tool": name}
after = []  # messages sent after the answer being made


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def task_obj(tid):
    t = tasks[tid]
    obj = {"taskId": tid, "status": t["status"], "createdAt": CREATED, "lastUpdatedAt": CREATED, "ttl": t["ttl"], "pollInterval": 10}
    if t["status"] == "working":
        obj["statusMessage"] = "working on it with key " + SECRET
    return obj


def result_of(tool):
    return {"content": [{"type": "text", "text": "%s done by %s, token=%s" % (tool, NAME, SECRET)}], "isError": False,
            "_meta": {"extra": "dropped"}}


def answer(method, params):
    if method == "initialize":
        caps = {"tools": {}}
        if TASKS:
            caps["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
        return {"protocolVersion": "2025-11-25", "serverInfo": {"name": "tasks", "version": "1"}, "capabilities": caps}
    if method == "tools/list":
        schema = {"type": "object", "properties": {}}
        optional = {"taskSupport": "optional"}
        plain = {"name": "plain", "inputSchema": schema}
        if FLIP and os.path.exists(FLIP):
            plain["execution"] = optional
        return {"tools": [{"name": "slow", "inputSchema": schema, "execution": optional},
                          {"name": "must", "inputSchema": schema, "execution": {"taskSupport": "required"}},
                          plain,
                          {"name": "crash", "inputSchema": schema},
                          {"name": "quick", "inputSchema": schema, "execution": optional},
                          {"name": "lazy", "inputSchema": schema, "execution": optional},
                          {"name": "note", "inputSchema": schema, "execution": optional}]}
    if method == "tools/call" and params.get("name") == "crash":
        sys.exit(0)
    if method == "tools/call":
        if TASKS and "task" in params:
            if params["name"] == "lazy":
                time.sleep(LAZY)
            tid = "t%d" % (len(tasks) + 1)
            status = "completed" if params["name"] in ("quick", "note") else "working"
            # The ttl asked for, at most a minute (60000 when none was asked).
            ttl = min(params["task"].get("ttl", 60000), 60000)
            tasks[tid] = {"polls": 0, "status": status, "tool": params["name"], "ttl": ttl}
            if params["name"] == "note":
                after.append({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task_obj(tid)})
            return {"task": task_obj(tid), "_meta": {"io.modelcontextprotocol/model-immediate-response": "started " + SECRET}}
        return result_of(params["name"])
    if method in ("tasks/get", "tasks/result", "tasks/cancel"):
        tid = params.get("taskId")
        if tid not in tasks:
            return ("error", -32602, "Failed to retrieve task: Task not found")
        t = tasks[tid]
        if method == "tasks/get":
            t["polls"] += 1
            if t["polls"] >= 2 and t["status"] == "working":
                t["status"] = "completed"
            return task_obj(tid)
        if method == "tasks/cancel":
            if t["status"] != "working":
                return ("error", -32602, "Cannot cancel task: already in terminal status '%s'" % t["status"])
            t["status"] = "cancelled"
            return task_obj(tid)
        t["status"] = "completed" if t["status"] == "working" else t["status"]
        r = result_of(t["tool"])
        r["_meta"] = {"io.modelcontextprotocol/related-task": {"taskId": tid}}
        return r
    if method == "ping":
        return {}
    return ("error", -32601, "no " + method)


for line in sys.stdin:
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(line)
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    result = answer(msg["method"], msg.get("params") or {})
    if isinstance(result, tuple):
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": result[1], "message": result[2]}})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    while after:
        send(after.pop(0))
