"""BENCHMARKS.md's sections, for the scripts that write one (`--write`)."""
import os

PATH = os.path.join(os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")), "BENCHMARKS.md")


def write_section(heading, section):
    """Replace the section whose heading starts with `heading` (e.g. "## `hmn top` with"), or put
    it before the real-GPU section (at the end if there is none)."""
    text = open(PATH).read()
    start = text.find(heading)
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        at = text.find("## On a real NVIDIA H200")
        at = at if at >= 0 else len(text)
        text = text[:at] + section + "\n" + text[at:]
    open(PATH, "w").write(text)
