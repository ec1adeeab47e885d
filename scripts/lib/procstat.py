"""A process's figures from /proc, for the measuring scripts."""


def status_kib(pid, field="VmRSS:"):
    """A KiB figure of /proc/<pid>/status (`VmRSS:` by default, `VmHWM:` for the peak); 0 when
    the line is missing."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0
