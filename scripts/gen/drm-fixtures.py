#!/usr/bin/env python3
"""Writes the DRM fixture trees under crates/testkit/fixtures/drm/ (checked in; rerun to regenerate).

The file formats follow the kernel: sysfs PCI attributes (`0x%04x`), amdgpu `mem_info_*` files
(decimal bytes), `uevent` (KEY=value), and DRM fdinfo as printed by amdgpu (new generic keys and
legacy `drm-memory-*` in KiB), i915 (`local0`/`system0` regions) and xe (`vram0`, `gtt`,
`system`), with tab after the colon as the kernel prints it.
"""
import os, shutil

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "testkit", "fixtures", "drm")
MIB = 1 << 20


def w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def link(target, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def card(sys, n, vendor, device, driver, slot, files=None, card_files=None):
    d = f"{sys}/class/drm/card{n}"
    w(f"{d}/device/vendor", f"0x{vendor:04x}\n")
    w(f"{d}/device/device", f"0x{device:04x}\n")
    w(f"{d}/device/uevent", f"DRIVER={driver}\nPCI_CLASS=30000\nPCI_ID={vendor:04X}:{device:04X}\nPCI_SLOT_NAME={slot}\nMODALIAS=pci:v0000{vendor:04X}d0000{device:04X}\n")
    for k, v in (files or {}).items():
        w(f"{d}/device/{k}", v)
    for k, v in (card_files or {}).items():
        w(f"{d}/{k}", v)
    w(f"{d}/dev", f"226:{n}\n")


def proc(root, pid, comm, fds):
    w(f"{root}/{pid}/comm", comm + "\n")
    w(f"{root}/{pid}/status", f"Name:\t{comm}\nState:\tS (sleeping)\nPid:\t{pid}\nNSpid:\t{pid}\n")
    for fd, (target, info) in fds.items():
        link(target, f"{root}/{pid}/fd/{fd}")
        w(f"{root}/{pid}/fdinfo/{fd}", info)


def fdinfo_head(fd_flags="02100002"):
    return f"pos:\t0\nflags:\t{fd_flags}\nmnt_id:\t27\nino:\t1073\n"


def amdgpu_new(client, slot, vram_kib, gtt_kib):
    return (fdinfo_head() + f"drm-driver:\tamdgpu\ndrm-client-id:\t{client}\ndrm-pdev:\t{slot}\npasid:\t32772\n"
            f"drm-total-vram:\t{vram_kib} KiB\ndrm-shared-vram:\t0\ndrm-active-vram:\t0\ndrm-resident-vram:\t{vram_kib} KiB\ndrm-purgeable-vram:\t0\n"
            f"drm-total-gtt:\t{gtt_kib} KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t{gtt_kib} KiB\ndrm-purgeable-gtt:\t0\n"
            f"drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-active-cpu:\t0\ndrm-resident-cpu:\t0\ndrm-purgeable-cpu:\t0\n"
            f"drm-memory-vram:\t{vram_kib} KiB\ndrm-memory-gtt: \t{gtt_kib} KiB\ndrm-memory-cpu: \t0 KiB\n"
            f"amd-evicted-vram:\t0 KiB\namd-requested-vram:\t{vram_kib} KiB\namd-requested-gtt:\t{gtt_kib} KiB\n"
            f"drm-engine-gfx:\t1392746000 ns\ndrm-engine-compute:\t0 ns\n")


def amdgpu_legacy(client, slot, vram_kib, gtt_kib):
    return (fdinfo_head() + f"drm-driver:\tamdgpu\ndrm-pdev:\t{slot}\ndrm-client-id:\t{client}\n"
            f"drm-memory-vram:\t{vram_kib} KiB\ndrm-memory-gtt: \t{gtt_kib} KiB\ndrm-memory-cpu: \t0 KiB\n"
            f"amd-memory-visible-vram:\t{vram_kib} KiB\namd-evicted-vram:\t0 KiB\namd-evicted-visible-vram:\t0 KiB\n"
            f"amd-requested-vram:\t{vram_kib} KiB\namd-requested-visible-vram:\t0 KiB\namd-requested-gtt:\t{gtt_kib} KiB\n"
            f"drm-engine-gfx:\t12000 ns\n")


def i915(client, slot, local_b, system_b):
    return (fdinfo_head() + f"drm-driver:\ti915\ndrm-client-id:\t{client}\ndrm-pdev:\t{slot}\n"
            f"drm-total-system0:\t{system_b}\ndrm-shared-system0:\t0\ndrm-active-system0:\t0\ndrm-resident-system0:\t{system_b}\ndrm-purgeable-system0:\t0\n"
            f"drm-total-local0:\t{local_b}\ndrm-shared-local0:\t0\ndrm-active-local0:\t0\ndrm-resident-local0:\t{local_b}\ndrm-purgeable-local0:\t0\n"
            f"drm-total-stolen-local0:\t0\ndrm-engine-render:\t25662044495 ns\ndrm-engine-copy:\t0 ns\n")


def xe_igpu(client, slot, gtt_kib):
    return (fdinfo_head() + f"drm-driver:\txe\ndrm-client-id:\t{client}\ndrm-pdev:\t{slot}\n"
            f"drm-total-system:\t0\ndrm-shared-system:\t0\ndrm-active-system:\t0\ndrm-resident-system:\t0\ndrm-purgeable-system:\t0\n"
            f"drm-total-gtt:\t{gtt_kib} KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t{gtt_kib} KiB\n"
            f"drm-total-stolen:\t0\ndrm-cycles-rcs:\t28257900\ndrm-total-cycles-rcs:\t7655183225\n")


def nvidia_drm(client, slot):
    # The NVIDIA driver's DRM node prints no memory statistics.
    return fdinfo_head() + f"drm-driver:\tnvidia-drm\ndrm-client-id:\t{client}\ndrm-pdev:\t{slot}\n"


def mixed():
    base = f"{ROOT}/mixed"
    sys, pr = f"{base}/sys", f"{base}/proc"
    card(sys, 0, 0x10DE, 0x2335, "nvidia", "0000:18:00.0")
    card(sys, 1, 0x1002, 0x744C, "amdgpu", "0000:03:00.0", {
        "mem_info_vram_total": f"{24560 * MIB}\n", "mem_info_vram_used": f"{4704 * MIB}\n",
        "mem_info_vis_vram_total": f"{24560 * MIB}\n", "mem_info_vis_vram_used": f"{4704 * MIB}\n",
        "mem_info_gtt_total": f"{31995 * MIB}\n", "mem_info_gtt_used": f"{112 * MIB}\n",
        "mem_info_vram_vendor": "samsung\n", "gpu_busy_percent": "37\n", "mem_busy_percent": "12\n"})
    card(sys, 2, 0x8086, 0x56A0, "i915", "0000:07:00.0", {}, {
        "lmem_total_bytes": f"{16256 * MIB}\n", "lmem_avail_bytes": f"{15232 * MIB}\n"})
    card(sys, 3, 0x8086, 0xA7A0, "xe", "0000:00:02.0")
    # Connectors and render nodes are not devices.
    w(f"{sys}/class/drm/card1-DP-1/status", "connected\n")
    w(f"{sys}/class/drm/renderD128/dev", "226:128\n")
    w(f"{sys}/class/drm/version", "drm 1.1.0 20060810\n")
    # Xorg: the same client twice (a dup'ed fd) -> counted once.
    proc(pr, 100, "Xorg", {
        "0": ("/dev/null", fdinfo_head()),
        "3": ("/dev/dri/card1", amdgpu_new(10, "0000:03:00.0", 256 * 1024, 32 * 1024)),
        "4": ("/dev/dri/card1", amdgpu_new(10, "0000:03:00.0", 256 * 1024, 32 * 1024)),
    })
    # A training job on an older kernel (legacy keys only), and its forked child sharing the client.
    job = amdgpu_legacy(20, "0000:03:00.0", 4096 * 1024, 64 * 1024)
    proc(pr, 200, "python3", {"5": ("/dev/dri/renderD128", job)})
    proc(pr, 201, "python3", {"5": ("/dev/dri/renderD128", job)})
    # Intel DG2 (i915 local memory) and an Intel iGPU on xe (no local region).
    proc(pr, 300, "firefox", {"7": ("/dev/dri/renderD129", i915(5, "0000:07:00.0", 512 * MIB, 8 * MIB))})
    proc(pr, 301, "gnome-shell", {"9": ("/dev/dri/renderD130", xe_igpu(6, "0000:00:02.0", 128 * 1024))})
    # A process using the NVIDIA DRM node: no memory figures there (NVML has them).
    proc(pr, 350, "kwin_wayland", {"3": ("/dev/dri/card0", nvidia_drm(1, "0000:18:00.0"))})
    # Another user's process: its fd table cannot be read (here: not a directory).
    w(f"{pr}/400/comm", "postgres\n")
    w(f"{pr}/400/fd", "")
    # Ordinary processes.
    proc(pr, 500, "bash", {"0": ("/dev/pts/0", fdinfo_head()), "1": ("/dev/pts/0", fdinfo_head())})
    w(f"{pr}/uptime", "1234.56 4567.89\n")


def wb(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def gpu_metrics(format_revision, content_revision, size):
    # The table's header (struct metrics_table_header): structure_size (u16, little-endian),
    # format_revision, content_revision; the rest of the table zeros.
    return size.to_bytes(2, "little") + bytes([format_revision, content_revision]) + bytes(size - 4)


def apus():
    """Machines whose GPU shares the host's memory: an APU (a Strix Halo-like Ryzen AI Max, a
    512 MiB carve-out and GTT, the power firmware's APU table, gpu_metrics format 3.0) and an
    MI300A-like card (no VRAM of its own beside GTT, a discrete-style table, format 1.5), on a
    host of 128 GiB."""
    base = f"{ROOT}/apus"
    sys, pr = f"{base}/sys", f"{base}/proc"
    card(sys, 0, 0x1002, 0x1586, "amdgpu", "0000:c4:00.0", {
        "mem_info_vram_total": f"{512 * MIB}\n", "mem_info_vram_used": f"{100 * MIB}\n",
        "mem_info_vis_vram_total": f"{512 * MIB}\n", "mem_info_vis_vram_used": f"{100 * MIB}\n",
        "mem_info_gtt_total": f"{62 * 1024 * MIB}\n", "mem_info_gtt_used": f"{3 * 1024 * MIB}\n",
        "gpu_busy_percent": "5\n"})
    wb(f"{sys}/class/drm/card0/device/gpu_metrics", gpu_metrics(3, 0, 264))
    card(sys, 1, 0x1002, 0x74A0, "amdgpu", "0000:02:00.0", {
        "mem_info_vram_total": "0\n", "mem_info_vram_used": "0\n",
        "mem_info_gtt_total": f"{128 * 1024 * MIB}\n", "mem_info_gtt_used": f"{21 * 1024 * MIB}\n"})
    wb(f"{sys}/class/drm/card1/device/gpu_metrics", gpu_metrics(1, 5, 1068))
    # A model server on the APU holding 64 MiB of the carve-out and 40 GiB of GTT; a job on
    # the MI300A-like card, all of it GTT.
    proc(pr, 600, "llama-server", {"4": ("/dev/dri/renderD128", amdgpu_new(30, "0000:c4:00.0", 64 * 1024, 40 * 1024 * 1024))})
    proc(pr, 700, "python3", {"5": ("/dev/dri/renderD129", amdgpu_new(31, "0000:02:00.0", 0, 20 * 1024 * 1024))})
    w(f"{pr}/meminfo", f"MemTotal:       {128 * 1024 * 1024} kB\nMemFree:        {40 * 1024 * 1024} kB\n"
      f"MemAvailable:   {80 * 1024 * 1024} kB\n")
    w(f"{pr}/uptime", "1234.56 4567.89\n")


def nvidia_only():
    base = f"{ROOT}/nvidia-only"
    sys, pr = f"{base}/sys", f"{base}/proc"
    card(sys, 0, 0x10DE, 0x2335, "nvidia", "0000:18:00.0")
    proc(pr, 350, "kwin_wayland", {"3": ("/dev/dri/card0", nvidia_drm(1, "0000:18:00.0"))})
    proc(pr, 500, "bash", {"0": ("/dev/pts/0", fdinfo_head())})


if __name__ == "__main__":
    shutil.rmtree(ROOT, ignore_errors=True)
    mixed()
    nvidia_only()
    apus()
    print("wrote", os.path.normpath(ROOT))
