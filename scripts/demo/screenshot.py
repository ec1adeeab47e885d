#!/usr/bin/env python3
"""The README's picture of `hmn top`: a real run, in tmux, turned into SVG.

The demo scenario (docs/demo-scenario.json) lists GPU processes by pids that do not exist here, so
this script starts real processes with the command lines of a training job, a server and a
notebook, puts their pids in a copy of the scenario, runs `hmn top` against the fake NVML in a
tmux terminal, lets it refresh a few times, and turns `tmux capture-pane -e` (text with its
colours) into an SVG of the terminal.

Usage: scripts/demo/screenshot.py [OUT.svg]   (default docs/img/hmn-top.svg)
Needs tmux and `cargo build` (scripts/demo/demo.sh's fake NVML is built the same way)."""
import html, json, os, re, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import ROOT, TARGET, build_fake  # noqa: E402  (scripts/lib)

COLS, ROWS = 110, 17
# xterm's palette for the 16 basic colours (0-7 normal, 8-15 bright).
PALETTE = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
           "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]
FG, BG = "#d4d4d4", "#1e1e1e"


def colour_256(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def parse(text):
    """Lines of (char, style) cells from text with SGR escapes."""
    lines = []
    style = {}
    for raw in text.split("\n")[:ROWS]:
        cells = []
        for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b])", raw):
            if m.group(2) is not None:
                cells.append((m.group(2), dict(style)))
                continue
            codes = [int(c) if c else 0 for c in m.group(1).split(";")]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    style = {}
                elif c == 1:
                    style["bold"] = True
                elif c == 2:
                    style["dim"] = True
                elif c == 22:
                    style.pop("bold", None)
                    style.pop("dim", None)
                elif c == 7:
                    style["reverse"] = True
                elif c == 27:
                    style.pop("reverse", None)
                elif 30 <= c <= 37:
                    style["fg"] = PALETTE[c - 30]
                elif 90 <= c <= 97:
                    style["fg"] = PALETTE[c - 90 + 8]
                elif 40 <= c <= 47:
                    style["bg"] = PALETTE[c - 40]
                elif c == 39:
                    style.pop("fg", None)
                elif c == 49:
                    style.pop("bg", None)
                elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                    style["fg" if c == 38 else "bg"] = colour_256(codes[i + 2])
                    i += 2
                elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                    style["fg" if c == 38 else "bg"] = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                    i += 4
                i += 1
        lines.append(cells)
    return lines


def svg(lines):
    cw, ch = 8.4, 17
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{COLS * cw + 20:.0f}" height="{ROWS * ch + 20}" '
           f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">',
           f'<rect width="100%" height="100%" rx="6" fill="{BG}"/>']
    for y, cells in enumerate(lines):
        x = 0
        runs = []  # (x, text, style)
        for c, st in cells:
            if runs and runs[-1][2] == st:
                runs[-1][1].append(c)
            else:
                runs.append((x, [c], st))
            x += 1
        for x0, chars, st in runs:
            fg, bg = st.get("fg", FG), st.get("bg")
            if st.get("reverse"):
                fg, bg = bg or BG, fg
            if bg:
                out.append(f'<rect x="{10 + x0 * cw:.1f}" y="{10 + y * ch}" width="{len(chars) * cw:.1f}" '
                           f'height="{ch}" fill="{bg}"/>')
            text = "".join(chars)
            if not text.strip():
                continue
            attrs = f'fill="{fg}"'
            if st.get("bold"):
                attrs += ' font-weight="bold"'
            if st.get("dim"):
                attrs += ' fill-opacity="0.6"'
            out.append(f'<text x="{10 + x0 * cw:.1f}" y="{10 + y * ch + 13}" {attrs} '
                       f'textLength="{len(chars) * cw:.1f}" xml:space="preserve">{html.escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "img", "hmn-top.svg")
    # A private copy: rewriting the shared one in place would crash a process that has it loaded.
    lib = f"/tmp/hmn-screenshot-{os.getpid()}.so"
    subprocess.run(["cp", build_fake(), lib], check=True)
    subprocess.run(["cargo", "build", "-q", "--bin", "hmn"], check=True, cwd=ROOT)
    # `sleep 600` under another argv[0]: the last argument is sleep's own.
    commands = ["python3 train.py --model llama-3-8b --batch 32 --steps",
                "python3 -m vllm.entrypoints.openai.api_server --max-num-seqs",
                "jupyter-lab --no-browser --ServerApp.shutdown_no_activity_timeout"]
    procs = [subprocess.Popen(["bash", "-c", f'exec -a "{c}" sleep 600'], stdin=subprocess.DEVNULL) for c in commands]
    scenario = json.load(open(os.path.join(ROOT, "docs", "demo-scenario.json")))
    pids = {}
    for d in scenario["devices"]:
        for key in ("compute_processes", "graphics_processes"):
            for row in d.get(key, []):
                row["pid"] = pids.setdefault(row["pid"], procs[len(pids) % len(procs)].pid)
    path = f"/tmp/hmn-screenshot-{os.getpid()}.json"
    json.dump(scenario, open(path, "w"))
    socket = f"hmn-shot-{os.getpid()}"
    empty = os.path.join(TARGET, "hmn-bench-empty-sysfs")
    os.makedirs(empty, exist_ok=True)
    try:
        subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", str(COLS),
                        "-y", str(ROWS), "env", f"HYPOMNESIS_NVML_LIBRARY={lib}", f"FAKE_NVML_SCENARIO={path}",
                        f"HYPOMNESIS_SYSFS={empty}", "TERM=xterm-256color",
                        os.path.join(TARGET, "debug", "hmn"), "top"], check=True)
        time.sleep(6)
        text = subprocess.run(["tmux", "-L", socket, "capture-pane", "-e", "-p", "-t", "s"], check=True,
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        for p in procs:
            p.kill()
            p.wait()
        os.remove(path)
        os.remove(lib)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(svg(parse(text)))
    print(re.sub(r"\x1b\[[0-9;]*m", "", text))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
