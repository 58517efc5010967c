#!/usr/bin/env python3
"""bench/overhead --saturate: hengshi's throughput and cost per request against an nginx proxy hop.

One run, one machine, one fixed-answer nginx "mock LLM" on loopback. Closed-loop wrk (one
thread) drives three paths in turn:
  direct      wrk → mock
  nginx hop   wrk → nginx (one worker, upstream keep-alive) → mock      the floor a proxy costs
  hengshi     wrk → hengshi (one thread; a client key, the PII walk, the router, the chain and
              metrics on; request log and cache off) → mock
at c=4 and c=64. For each it prints RPS, p50/p99, the server's CPU µs per request (utime +
stime from /proc/PID/stat over the run, and the kernel's part of it apart) and syscalls per request, in all and by name
(perf trace's summary, in a separate short phase so counting does not slow the timed runs). A streaming
phase does the same over SSE: CPU per chunk, and the TTFT each hop adds at a fixed rate.

With --compare OLD_BINARY a second gateway (the build before a change) runs beside hengshi and is
measured right after it in every run; --rounds N repeats the runs and reports medians, so a
before/after reads as a ratio from one run on one machine.

--instructions SECONDS replaces the timed runs with a count: the gateway runs under callgrind
(valgrind) and the instructions it executes per proxied request, and per streamed request,
over SECONDS of c=4 load are printed (beside --compare's binary), with the top functions by
inclusive count. Times on this
shared machine swing 20-30% between runs; the count moves by under 1%, so a cut of a few
percent in the gateway's own code shows (the kernel's share does not: use the timed runs).
With --check it fails when the count rose more than 5% above bench/baseline.json's
(--record writes it); its last line is the count.

Ratios are what to read: the machine is shared and noisy, so every figure is against a
baseline measured in the same run. `--check` compares the RPS ratio with bench/baseline.json's
for this CPU model (the ratio itself depends on the kind of machine: see recorded_ratio) and
exits 1 when it fell more than 15% below it; the last line printed is the ratio.
Loopback only; every phase is bounded in time.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
STREAM_CHUNKS = 8  # content chunks in the mock's SSE answer

ANSWER = {
    "id": "chatcmpl-mock", "object": "chat.completion", "created": 1700000000, "model": "mock",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant",
                             "content": "Your parcel left our warehouse yesterday and should arrive within two days."}}],
    "usage": {"prompt_tokens": 31, "completion_tokens": 16, "total_tokens": 47},
}


def stream_answer():
    words = "Your parcel left our warehouse yesterday and should arrive soon".split()
    events = []
    for i in range(STREAM_CHUNKS):
        delta = {"role": "assistant", "content": words[i]} if i == 0 else {"content": " " + words[i]}
        events.append({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1700000000,
                       "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    events.append({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1700000000,
                   "model": "mock", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 31, "completion_tokens": STREAM_CHUNKS,
                             "total_tokens": 31 + STREAM_CHUNKS}})
    return "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events) + "data: [DONE]\n\n"


BODY = {"model": "cloud-small",
        "messages": [{"role": "system", "content": "You are a helpful customer-service assistant."},
                     {"role": "user", "content": "Hi, my parcel has not arrived yet, order 12345. Can you check where it is?"}],
        "temperature": 0.2, "max_tokens": 64}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def wait_listening(port, proc, what, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited: see its log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"{what} did not listen on {port}")


class Children:
    def __init__(self):
        self.procs = []

    def start(self, args, log, **kw):
        proc = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT, **kw)
        self.procs.append(proc)
        return proc

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def start_nginx(children, work, name, server_block):
    """One nginx master with one worker; returns the worker's pid (whose CPU we count)."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  keepalive_requests 10000000; keepalive_timeout 120s;
  {server_block}
}}
""")
    master = children.start([shutil.which("nginx") or "/usr/sbin/nginx", "-c", conf, "-p", d], os.path.join(d, "out.log"))
    return master


def worker_pid(master, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{master.pid}/task/{master.pid}/children") as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.02)
    sys.exit("nginx started no worker")


def cpu_seconds(pid):
    """(user, kernel) CPU seconds of the process so far: utime and stime, fields 14 and 15; and its
    minor page faults, field 10 (kernel time no syscall count shows: memory the allocator returned
    and touches again)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK, int(fields[7])


UNITS = {"us": 1, "ms": 1e3, "s": 1e6}


def run_wrk(url, script, connections, seconds):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    pct = {m.group(1): float(m.group(2)) * UNITS[m.group(3)]
           for m in re.finditer(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)}
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "requests": requests,
            "p50_us": pct.get("50", 0.0), "p99_us": pct.get("99", 0.0),
            "errors": (int(bad.group(1)) if bad else 0) + (sum(map(int, errors.groups())) if errors else 0)}


def measure(url, script, connections, seconds, pid):
    user_before, sys_before, faults_before = cpu_seconds(pid)
    r = run_wrk(url, script, connections, seconds)
    user_after, sys_after, faults_after = cpu_seconds(pid)
    r["faults"] = (faults_after - faults_before) / max(1, r["requests"])
    r["cpu_us"] = (user_after - user_before + sys_after - sys_before) * 1e6 / max(1, r["requests"])
    # The kernel's part apart: on loopback it includes delivering to, and waking, the peer.
    r["sys_us"] = (sys_after - sys_before) * 1e6 / max(1, r["requests"])
    return r


def perf_during_load(perf_args, url, script, conc, seconds):
    """Runs perf (attached to the server) for the length of one closed-loop wrk run; returns the run."""
    attached = subprocess.Popen(perf_args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # perf attaches before the load starts; not a synchronisation of the server
    r = run_wrk(url, script, conc, seconds)
    attached.send_signal(signal.SIGINT)
    attached.wait(timeout=30)
    return r


def syscalls_per_request(url, script, pid, seconds, conc):
    """Syscalls the server makes per request at `conc` connections, in all and by name (perf
    trace's summary), so a syscall nginx does not make shows by name."""
    perf = shutil.which("perf")
    if not perf:
        return None
    out = tempfile.NamedTemporaryFile(delete=False, suffix=".txt").name
    r = perf_during_load([perf, "trace", "-s", "-p", str(pid), "-o", out], url, script, conc, seconds)
    by_name = {}
    with open(out) as f:
        for m in re.finditer(r"^\s+([a-z_0-9]+)\s+(\d+)\s+\d+\s+[\d.]+", f.read(), re.M):
            by_name[m.group(1)] = by_name.get(m.group(1), 0) + int(m.group(2))  # summed over threads
    os.unlink(out)
    if not by_name:
        return None
    n = max(1, r["requests"])
    return {"total": sum(by_name.values()) / n,
            "by_name": {k: v / n for k, v in sorted(by_name.items(), key=lambda kv: -kv[1]) if v / n >= 0.05}}


def allocations_per_request(url, script, pid, seconds):
    """Heap allocations per request at c=4: uprobes on the allocator the server maps (mimalloc's
    operator new, and malloc), counted by perf stat over one wrk run. Deterministic where CPU time
    is noisy, so a cut in allocations reads as a number. Needs root for `perf probe`; the probes
    are removed afterwards. None when that is not possible."""
    perf = shutil.which("perf")
    if not perf:
        return None
    with open(f"/proc/{pid}/maps") as f:
        lib = next((line.split()[-1] for line in f if "libmimalloc" in line), None)
    if not lib:
        return None
    # What is printed: (the probe's event, the allocator's function it sits on).
    events = {"operator new": ("hengshi_bench:new", "mi_new"), "malloc": ("hengshi_bench:malloc", "mi_malloc")}
    added = []
    out = tempfile.NamedTemporaryFile(delete=False, suffix=".csv").name
    try:
        for event, function in events.values():
            if subprocess.run([perf, "probe", "-q", "-x", lib, "-a", f"{event}={function}"],
                              capture_output=True, timeout=60).returncode != 0:
                return None
            added.append(event)
        args = [perf, "stat", "-x,", "-o", out, "-p", str(pid)]
        for event in added:
            args += ["-e", event]
        r = perf_during_load(args, url, script, 4, seconds)
        counts = {}
        with open(out) as f:
            for line in f:
                m = re.match(r"^(\d+),,([^,]+),", line)
                if m:
                    counts[m.group(2)] = int(m.group(1))
        n = max(1, r["requests"])
        return {name: counts.get(event, 0) / n for name, (event, _) in events.items()}
    finally:
        os.unlink(out)
        for event in added:
            subprocess.run([perf, "probe", "-q", "-d", event], capture_output=True, timeout=60)


def profile_top(url, script, pid, conc, seconds, top, keep=None):
    """perf record of the server under closed-loop load; prints its top entries by self time.
    `keep` names a file to leave the recording in, for perf report's call graphs."""
    perf = shutil.which("perf")
    if not perf:
        print("profile: perf (linux-perf) not available")
        return
    data = keep or tempfile.NamedTemporaryFile(delete=False, suffix=".perf").name
    perf_during_load([perf, "record", "-F", "999", "--call-graph", "dwarf,16384", "-p", str(pid), "-o", data],
                     url, script, conc, seconds)
    report = subprocess.run([perf, "report", "-i", data, "--no-children", "--stdio", "-g", "none",
                             "--percent-limit", "0.5", "--sort", "dso,symbol"],
                            capture_output=True, text=True, timeout=300).stdout
    if not keep:
        os.unlink(data)
    rows = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
    print(f"\nprofile of hengshi at c={conc} (perf, self time, top {top}):")
    for line in rows[:top]:
        print("  " + line.strip()[:150])


BASELINE_FILE = os.path.join(ROOT, "bench", "baseline.json")


def load_baseline():
    """bench/baseline.json's recorded figures (what --check compares with), {} when absent."""
    if not os.path.exists(BASELINE_FILE):
        return {}
    with open(BASELINE_FILE) as f:
        return json.load(f)


def cpu_model():
    """This machine's CPU model name (/proc/cpuinfo), the key of its recorded RPS ratios."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def recorded_ratio(baseline, model):
    """The RPS ratios recorded for this CPU: the longest key that begins its model name, else
    the entry "*" (ratios recorded before they were kept per CPU, on a machine not noted).

    The ratio is hengshi's cost per request against nginx's, and how the two compare depends on
    the machine: where a syscall is dear (a paravirtualised guest) the kernel's share, the same
    for both, dominates and the ratio is higher; where it is cheap, the user-space work that
    nginx does not do weighs more. Measured on one kind of machine, the ratio guards that kind."""
    ratios = baseline.get("overhead_rps_ratio", {})
    keys = [k for k in ratios if k != "*" and model.startswith(k)]
    if keys:
        kind = max(keys, key=len)
        return kind, ratios[kind]
    return ("any CPU without its own entry (*)", ratios["*"]) if "*" in ratios else (None, None)


def save_baseline(baseline):
    with open(BASELINE_FILE, "w") as f:
        json.dump(baseline, f, indent=2)
        f.write("\n")


def instructions_per_request(proc, url, script, seconds, top, keep_dir=None):
    """Instructions the gateway `proc` (started under callgrind with instrumentation off) runs per
    proxied request: counted only over a closed-loop wrk run at c=4 after a warm-up, so start-up
    and first-request costs stay out. A count, not a time: it does not move with the machine's
    noise, so a before/after of a few percent shows. Returns (per request, [(per request, function)])."""
    run_wrk(url, script, 4, 2)
    subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, timeout=60)
    r = run_wrk(url, script, 4, seconds)
    subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True, timeout=60)
    proc.send_signal(signal.SIGINT)  # the gateway's graceful stop; callgrind writes its file at exit
    proc.wait(timeout=120)
    out = proc.callgrind_out
    if keep_dir:
        os.makedirs(keep_dir, exist_ok=True)
        shutil.copy(out, keep_dir)
    n = max(1, r["requests"])
    report = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], capture_output=True, text=True,
                            timeout=300).stdout
    total = int(re.search(r"^\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", report, re.M).group(1).replace(",", ""))
    functions, seen = [], set()
    for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*?:(hengshi::(?:\(anonymous namespace\)::|[\w:~])+)", report, re.M):
        name = m.group(2)
        if name in seen or name.startswith("hengshi::cli::"):
            continue
        seen.add(name)
        functions.append((int(m.group(1).replace(",", "")) / n, name))
        if len(functions) >= top:
            break
    return total / n, functions


def loadgen_ttft(build, url, body, headers, rate, seconds):
    args = [os.path.join(build, "bench", "bench_loadgen"), "--url", url, "--body", body, "--rate", str(rate),
            "--seconds", str(seconds), "--connections", "16", "--warmup-seconds", "1"]
    for h in headers:
        args += ["--header", h]
    return json.loads(subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=8, help="each timed wrk run")
    ap.add_argument("--check", action="store_true",
                    help="fail when the RPS ratio fell >15%% below bench/baseline.json (with --instructions: "
                         "when the count rose >5%% above it)")
    ap.add_argument("--record", action="store_true",
                    help="write this run's ratios (with --instructions: its count) into bench/baseline.json")
    ap.add_argument("--no-stream", action="store_true", help="skip the streaming phase")
    ap.add_argument("--allocs", action="store_true",
                    help="also count heap allocations per request (perf probe on mimalloc; needs root)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print the top N entries of a perf profile of hengshi (at --profile-at)")
    ap.add_argument("--profile-at", type=int, default=64, metavar="C",
                    help="the concurrency the profile is taken at (default 64)")
    ap.add_argument("--profile-data", metavar="FILE", help="keep that profile's recording in FILE")
    ap.add_argument("--build-dir", default=os.environ.get("HENGSHI_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--hengshi", help="the gateway binary to measure (default: BUILD/src/cli/hengshi), "
                                      "e.g. an older build for a before/after on the same machine")
    ap.add_argument("--compare", metavar="BINARY",
                    help="another gateway binary (e.g. the build before a change), measured in the same "
                         "runs right after hengshi, with its CPU per request and RPS as ratios of hengshi's")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the timed runs; each figure is the median over the rounds")
    ap.add_argument("--instructions", type=int, default=0, metavar="SECONDS",
                    help="instead of the timed runs: instructions per request of hengshi (and --compare) "
                         "under callgrind (valgrind) over SECONDS of c=4 load, with the top functions")
    ap.add_argument("--callgrind-data", metavar="DIR",
                    help="with --instructions: keep the callgrind recordings in DIR (callgrind_annotate reads them)")
    args = ap.parse_args()
    for tool in ("wrk",):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: scripts/setup installs it")
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        sys.exit("nginx is missing: scripts/setup --bench installs it")
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        sys.exit("valgrind is missing: scripts/setup --bench installs it")
    build = args.build_dir
    hengshi = args.hengshi or os.path.join(build, "src", "cli", "hengshi")

    work = tempfile.mkdtemp(prefix="hengshi-saturate-")
    children = Children()
    try:
        body = os.path.join(work, "body.json")
        stream_body = os.path.join(work, "stream_body.json")
        with open(body, "w") as f:
            json.dump(BODY, f)
        with open(stream_body, "w") as f:
            json.dump(dict(BODY, stream=True), f)

        mock_port, hop_port = free_port(), free_port()
        mock = start_nginx(children, work, "mock", f"""server {{
    listen 127.0.0.1:{mock_port} reuseport;
    location = /v1/chat/completions {{ default_type application/json; return 200 {nginx_quote(json.dumps(ANSWER))}; }}
    location = /stream/v1/chat/completions {{ default_type text/event-stream; return 200 {nginx_quote(stream_answer())}; }}
  }}""")
        hop = start_nginx(children, work, "hop", f"""upstream mock {{ server 127.0.0.1:{mock_port}; keepalive 256; }}
  server {{
    listen 127.0.0.1:{hop_port};
    location / {{ proxy_pass http://mock; proxy_http_version 1.1; proxy_set_header Connection ""; }}
    location /stream/ {{ proxy_pass http://mock; proxy_http_version 1.1; proxy_set_header Connection "";
                        proxy_buffering off; }}
  }}""")
        wait_listening(mock_port, mock, "mock nginx")
        wait_listening(hop_port, hop, "nginx hop")
        mock_worker, hop_worker = worker_pid(mock), worker_pid(hop)

        key = "sk-bench-" + hashlib.sha256(work.encode()).hexdigest()[:16]
        keys = os.path.join(work, "keys.yaml")
        with open(keys, "w") as f:
            f.write(f"keys:\n  - name: bench\n    sha256: {hashlib.sha256(key.encode()).hexdigest()}\n")

        def start_gateway(name, base_path, binary=hengshi, callgrind=False):
            port, admin = free_port(), free_port()
            conf = os.path.join(work, f"{name}.yaml")
            with open(conf, "w") as f:
                f.write(f"""server: {{listen: "127.0.0.1:{port}", admin_listen: "127.0.0.1:{admin}", threads: 1,
         idle_timeout_ms: 120000, keys_file: "{keys}"}}
log: {{requests: ""}}
cache: {{enabled: false}}  # the proxy path is measured: the same request repeats
pools:
  cloud-small: {{members: [{{name: mock, base_url: "http://127.0.0.1:{mock_port}{base_path}/v1", model: mock-small, max_concurrent: 4096}}]}}
  cloud-large: {{members: [{{name: mock, base_url: "http://127.0.0.1:{mock_port}{base_path}/v1", model: mock-large, max_concurrent: 4096}}]}}
""")
            prefix = []
            if callgrind:
                out = os.path.join(work, f"{name}.callgrind")
                prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
            proc = children.start(prefix + [binary, "serve", "--config", conf], os.path.join(work, f"{name}.log"))
            proc.callgrind_out = out if callgrind else None
            wait_listening(port, proc, f"hengshi ({name})", seconds=120 if callgrind else 60)
            return proc, port


        if not args.instructions:
            gateway, gw_port = start_gateway("gateway", "")
            if args.compare:
                before, before_port = start_gateway("before", "", args.compare)

        def lua(name, body_file, auth):
            path = os.path.join(work, name + ".lua")
            with open(path, "w") as f:
                f.write(f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                        f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
                if auth:
                    f.write(f'wrk.headers["Authorization"] = "Bearer {key}"\n')
            return path

        plain, keyed = lua("plain", body, False), lua("keyed", body, True)
        if args.instructions:
            binaries = [("hengshi", hengshi)] + ([("before", args.compare)] if args.compare else [])
            counted, streamed = {}, {}
            sse_keyed = lua("sse_instructions", stream_body, True)
            for name, binary in binaries:
                proc, port = start_gateway(name + "-callgrind", "", binary, callgrind=True)
                counted[name] = instructions_per_request(proc, f"http://127.0.0.1:{port}/v1/chat/completions",
                                                         keyed, args.instructions, 15, args.callgrind_data)
                proc, port = start_gateway(name + "-callgrind-sse", "/stream", binary, callgrind=True)
                streamed[name] = instructions_per_request(proc, f"http://127.0.0.1:{port}/v1/chat/completions",
                                                          sse_keyed, args.instructions, 0, args.callgrind_data)
            print(f"instructions per request (callgrind, wrk c=4 for {args.instructions} s after a warm-up)")
            print(f"  {'':10}{'proxied':>12}{'streamed':>12}   (streamed: {STREAM_CHUNKS} content chunks + usage + [DONE])")
            for name in counted:
                print(f"  {name:10}{counted[name][0]:>12,.0f}{streamed[name][0]:>12,.0f}")
            if args.compare:
                print(f"  hengshi vs before: proxied {counted['hengshi'][0] / counted['before'][0]:.3f}x, "
                      f"streamed {streamed['hengshi'][0] / streamed['before'][0]:.3f}x")
            print("top functions of hengshi, inclusive instructions per request:")
            for per_request, function in counted["hengshi"][1]:
                print(f"  {per_request:>10,.0f}  {function}")
            # A count is steady where times are not: the guard a slower hot path cannot pass.
            baseline = load_baseline()
            count = round(counted["hengshi"][0])
            status = 0
            if args.record:
                baseline["instructions_per_request"] = count
                save_baseline(baseline)
            if args.check:
                recorded = baseline.get("instructions_per_request")
                if not recorded:
                    sys.exit("no instructions_per_request in bench/baseline.json: run with --record first")
                if count > recorded * 1.05:
                    print(f"REGRESSION: {count} instructions per request > {recorded * 1.05:.0f} "
                          f"(105% of recorded {recorded})")
                    status = 1
            print(f"instructions per request: {count}")
            return status
        paths = [("direct", f"http://127.0.0.1:{mock_port}/v1/chat/completions", plain, mock_worker),
                 ("nginx hop", f"http://127.0.0.1:{hop_port}/v1/chat/completions", plain, hop_worker),
                 ("hengshi", f"http://127.0.0.1:{gw_port}/v1/chat/completions", keyed, gateway.pid)]
        if args.compare:
            paths.append(("before", f"http://127.0.0.1:{before_port}/v1/chat/completions", keyed, before.pid))

        # Every path must answer 200 before anything is timed (a 401 runs faster than a proxy).
        for name, url, script, _ in paths:
            r = run_wrk(url, script, 1, 1)
            if r["errors"] or not r["requests"]:
                sys.exit(f"{name}: {r['errors']} errors in the warm-up: no measurement")

        print(f"closed loop, wrk -t1, {args.seconds} s per run, non-streaming; server CPU from /proc/PID/stat")
        print(f"{'path':12}{'conc':>6}{'RPS':>10}{'p50 µs':>9}{'p99 µs':>9}{'CPU µs/req':>12}{'of it sys':>11}{'faults/req':>11}{'errors':>8}")
        def print_row(name, conc, r):
            print(f"{name:12}{conc:>6}{r['rps']:>10.0f}{r['p50_us']:>9.0f}{r['p99_us']:>9.0f}"
                  f"{r['cpu_us']:>12.1f}{r['sys_us']:>11.1f}{r['faults']:>11.3f}{r['errors']:>8}", flush=True)

        runs = {}
        for round_index in range(args.rounds):
            if args.rounds > 1:
                print(f"round {round_index + 1} of {args.rounds}")
            for conc in (4, 64):
                for name, url, script, pid in paths:
                    r = measure(url, script, conc, args.seconds, pid)
                    runs.setdefault((name, conc), []).append(r)
                    print_row(name, conc, r)
        # Each figure: the median over the rounds (errors: the sum).
        results = {key: {field: (sum(r[field] for r in rs) if field == "errors"
                                 else sorted(r[field] for r in rs)[len(rs) // 2]) for field in rs[0]}
                   for key, rs in runs.items()}
        if args.rounds > 1:
            print(f"medians over {args.rounds} rounds:")
            for (name, conc), r in results.items():
                print_row(name, conc, r)
        if args.compare:
            for conc in (4, 64):
                new, old = results[("hengshi", conc)], results[("before", conc)]
                per_round = [n["cpu_us"] / o["cpu_us"] for n, o in zip(runs[("hengshi", conc)], runs[("before", conc)])]
                print(f"  hengshi vs before ({args.compare}), c={conc}: RPS {new['rps'] / old['rps']:.2f}x, "
                      f"CPU per request {new['cpu_us'] / old['cpu_us']:.2f}x "
                      f"(per round: {', '.join(f'{x:.2f}x' for x in per_round)})")

        # At both loads: a read attempted before its bytes can have arrived fails (EAGAIN) more
        # often at one of them, and an extra epoll_wait shows at the other.
        for conc in (4, 64):
            sys_counts = {name: syscalls_per_request(url, script, pid, 3, conc) for name, url, script, pid in paths}
            if not all(v is not None for v in sys_counts.values()):
                print("syscalls per request: perf (linux-perf) not available")
                break
            print(f"syscalls per request (perf trace, c={conc}): " +
                  ", ".join(f"{n} {v['total']:.1f}" for n, v in sys_counts.items()))
            for n, v in sys_counts.items():
                print(f"  {n:10} " + ", ".join(f"{k} {x:.2f}" for k, x in v["by_name"].items()))
        if args.allocs:
            allocs = {name: allocations_per_request(url, script, pid, 3)
                      for name, url, script, pid in paths if name in ("hengshi", "before")}
            if all(v is not None for v in allocs.values()):
                print("heap allocations per request (uprobes on mimalloc, c=4): " +
                      ", ".join(f"{n} " + " + ".join(f"{k} {x:.1f}" for k, x in v.items())
                                for n, v in allocs.items()))
            else:
                print("heap allocations per request: perf probe not available (needs root and linux-perf)")

        ratio = {c: results[("hengshi", c)]["rps"] / results[("nginx hop", c)]["rps"] for c in (4, 64)}
        direct_p50 = results[("direct", 4)]["p50_us"]
        added_hop = results[("nginx hop", 4)]["p50_us"] - direct_p50
        added_gw = results[("hengshi", 4)]["p50_us"] - direct_p50
        cpu = results[("hengshi", 4)]["cpu_us"]
        verdicts = [
            (f"RPS hengshi/nginx c=4 {ratio[4]:.2f}x", ratio[4] >= 0.6, "≥ 0.6x"),
            (f"RPS hengshi/nginx c=64 {ratio[64]:.2f}x", ratio[64] >= 0.6, "≥ 0.6x"),
            (f"added p50 c=4 hengshi {added_gw:.0f} µs vs nginx {added_hop:.0f} µs = "
             f"{added_gw / max(1.0, added_hop):.2f}x", added_gw <= 2 * max(1.0, added_hop), "≤ 2x"),
            (f"hengshi CPU per request {cpu:.1f} µs (nginx hop {results[('nginx hop', 4)]['cpu_us']:.1f})",
             cpu <= 50, "≤ 50 µs"),
        ]
        for text, ok, target in verdicts:
            print(f"  {text:70} target {target}: {'ok' if ok else 'NOT MET'}")
        errors = sum(r["errors"] for r in results.values())
        if args.profile:
            profile_top(paths[2][1], paths[2][2], gateway.pid, args.profile_at, args.seconds // 2 or 1, args.profile,
                        args.profile_data)

        if not args.no_stream:
            stream_gw, stream_port = start_gateway("stream", "/stream")
            sse = lua("sse", stream_body, True)
            sse_plain = lua("sse_plain", stream_body, False)
            spaths = [("direct", f"http://127.0.0.1:{mock_port}/stream/v1/chat/completions", sse_plain, mock_worker),
                      ("nginx hop", f"http://127.0.0.1:{hop_port}/stream/v1/chat/completions", sse_plain, hop_worker),
                      ("hengshi", f"http://127.0.0.1:{stream_port}/v1/chat/completions", sse, stream_gw.pid)]
            print(f"\nstreaming ({STREAM_CHUNKS} content chunks + usage + [DONE]), c=4")
            print(f"{'path':12}{'RPS':>10}{'CPU µs/req':>12}{'CPU µs/chunk':>14}{'TTFT p50 µs':>13}{'errors':>8}")
            rate = 500
            for name, url, script, pid in spaths:
                r = measure(url, script, 4, args.seconds // 2 or 1, pid)
                headers = [f"Authorization: Bearer {key}"] if name == "hengshi" else []
                t = loadgen_ttft(build, url, stream_body, headers, rate, 3)
                r["ttft_us"] = t["first_byte_p50_us"]
                results[("stream " + name, 4)] = r
                errors += r["errors"] + t["errors"] + t["non_200"]
                print(f"{name:12}{r['rps']:>10.0f}{r['cpu_us']:>12.1f}{r['cpu_us'] / STREAM_CHUNKS:>14.2f}"
                      f"{r['ttft_us']:>13.0f}{r['errors'] + t['errors'] + t['non_200']:>8}", flush=True)
            d = results[("stream direct", 4)]["ttft_us"]
            print(f"  added TTFT p50 at {rate} req/s: nginx hop {results[('stream nginx hop', 4)]['ttft_us'] - d:.0f} µs, "
                  f"hengshi {results[('stream hengshi', 4)]['ttft_us'] - d:.0f} µs")

        baseline = load_baseline()
        if args.record:
            baseline.setdefault("overhead_rps_ratio", {})[cpu_model()] = {"c4": round(ratio[4], 3),
                                                                          "c64": round(ratio[64], 3)}
            save_baseline(baseline)
        status = 0
        if errors:
            print(f"{errors} errors or non-200 answers during the runs")
            status = 1
        if args.check:
            model = cpu_model()
            kind, recorded = recorded_ratio(baseline, model)
            if not recorded:
                sys.exit(f"no RPS ratio in bench/baseline.json for this CPU ({model}; recorded: "
                         f"{', '.join(baseline.get('overhead_rps_ratio', {})) or 'none'}): "
                         "run with --record on this kind of machine first")
            print(f"  --check against the ratios recorded on {kind}")
            for c in (4, 64):
                floor = recorded[f"c{c}"] * 0.85
                if ratio[c] < floor:
                    print(f"REGRESSION: c={c} ratio {ratio[c]:.3f} < {floor:.3f} (85% of recorded {recorded[f'c{c}']})")
                    status = 1
        print(f"rps ratio hengshi/nginx: {min(ratio.values()):.3f}")
        return status
    finally:
        children.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
