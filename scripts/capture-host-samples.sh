#!/usr/bin/env bash
# Copy the /proc and /sys files that aisp's system parsers read (crates/hw/src/system/*, crates/hw/src/host/*)
# into a directory tree that mirrors the host, so that unit tests can run the
# same readers on it (tests/data/host/<name>/).
#
#   OUT=/tmp/out scripts/capture-host-samples.sh [NAME]
#
# writes $OUT/host/<NAME>/proc/..., $OUT/host/<NAME>/sys/..., ... where NAME
# defaults to a description of the host (e.g. `h100x8-ubuntu22`). Commit the
# result under tests/data/host/<NAME>/.
#
# Symbolic links (sysfs devices) are not copied as links: the resolved target
# of a link L is written to the file L.link, which aisp's HostRoot reads when
# it runs on a captured tree. Nothing secret is copied: no environment, no MAC
# addresses, no host names, no serial numbers.
set -u
shopt -s nullglob

OUT=${OUT:?set OUT to the directory to write to}
NAME=${1:-}
if [ -z "$NAME" ]; then
    gpus=0
    if command -v nvidia-smi >/dev/null 2>&1; then
        gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
        model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 |
            tr 'A-Z' 'a-z' | sed -e 's/nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/-$//')
        NAME="${model:-gpu}-x${gpus}"
    else
        NAME="nogpu"
    fi
    if [ -f /.dockerenv ] || [ -f /run/.containerenv ]; then NAME="$NAME-container"; fi
fi
DEST="$OUT/host/$NAME"
mkdir -p "$DEST"

# copy FILE...: copy readable regular files (sysfs files are read with cat:
# their reported size is not their content's size).
copy() {
    local f
    for f in "$@"; do
        [ -f "$f" ] && [ -r "$f" ] || continue
        mkdir -p "$DEST$(dirname "$f")"
        if ! timeout 2 cat "$f" >"$DEST$f" 2>/dev/null; then rm -f "$DEST$f"; fi
    done
}

# link LINK...: record where a symbolic link (or directory) resolves.
link() {
    local l
    for l in "$@"; do
        [ -e "$l" ] || continue
        mkdir -p "$DEST$(dirname "$l")"
        readlink -f "$l" >"$DEST$l.link"
    done
}

# Operating system and kernel.
copy /etc/os-release /proc/sys/kernel/osrelease /proc/version
copy /proc/driver/nvidia/version /sys/module/nvidia/version /proc/modules

# CPU, memory, NUMA, huge pages.
copy /proc/cpuinfo /proc/meminfo /proc/loadavg /proc/stat
copy /sys/devices/system/cpu/online /sys/devices/system/cpu/possible /sys/devices/system/cpu/present
for c in /sys/devices/system/cpu/cpu[0-9]*; do
    copy "$c/topology/physical_package_id" "$c/topology/core_id" "$c/topology/die_id"
    copy "$c/cpufreq/scaling_governor" "$c/cpufreq/cpuinfo_max_freq"
done
for i in /sys/devices/system/cpu/cpu0/cache/index*; do
    copy "$i/level" "$i/type" "$i/size" "$i/shared_cpu_list" "$i/coherency_line_size"
done
copy /sys/devices/system/node/online /sys/devices/system/node/possible
for n in /sys/devices/system/node/node[0-9]*; do
    copy "$n/cpulist" "$n/meminfo" "$n/distance"
    for h in "$n"/hugepages/hugepages-*; do copy "$h/nr_hugepages" "$h/free_hugepages"; done
done
for h in /sys/kernel/mm/hugepages/hugepages-*; do copy "$h/nr_hugepages" "$h/free_hugepages"; done

# Kernel parameters.
copy /proc/sys/kernel/numa_balancing /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/nmi_watchdog
copy /proc/sys/vm/swappiness /proc/sys/vm/dirty_ratio /proc/sys/vm/dirty_background_ratio
copy /proc/sys/vm/zone_reclaim_mode /proc/sys/vm/max_map_count /proc/sys/vm/overcommit_memory
copy /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag
copy /proc/sys/net/core/rmem_max /proc/sys/net/core/wmem_max /proc/sys/net/core/somaxconn
copy /proc/sys/net/core/netdev_max_backlog /proc/sys/net/ipv4/tcp_rmem /proc/sys/net/ipv4/tcp_wmem
copy /proc/sys/fs/file-max
# Only the IOMMU switches of the kernel command line (the rest may name private things).
mkdir -p "$DEST/proc"
tr ' ' '\n' </proc/cmdline | grep -E '^(intel_iommu|amd_iommu|iommu)(=|$)' | tr '\n' ' ' >"$DEST/proc/cmdline"

# Containers and cgroups.
copy /proc/self/cgroup /proc/self/mountinfo /proc/self/status /proc/self/limits /proc/1/cgroup /proc/1/comm
for f in /.dockerenv /run/.containerenv; do
    if [ -e "$f" ]; then mkdir -p "$DEST$(dirname "$f")"; : >"$DEST$f"; fi
done
# The cgroup files of this process's groups and of their ancestors (a limit
# set on a parent group applies too): v1 controllers and the v2 group.
cgroup_files() {
    local d=$1
    copy "$d/cgroup.controllers" "$d/cpu.max" "$d/memory.max" "$d/memory.high" "$d/pids.max" \
        "$d/cpuset.cpus.effective" "$d/cpu.cfs_quota_us" "$d/cpu.cfs_period_us" \
        "$d/memory.limit_in_bytes" "$d/cpuset.cpus" "$d/cpuset.effective_cpus"
}
while IFS=: read -r _ controllers path; do
    if [ -z "$controllers" ]; then
        bases=(/sys/fs/cgroup /sys/fs/cgroup/unified)
    else
        bases=()
        for c in ${controllers//,/ }; do bases+=(/sys/fs/cgroup/"${c#name=}"); done
    fi
    for b in "${bases[@]}"; do
        p=$path
        while :; do
            cgroup_files "$b${p%/}"
            [ "$p" = "/" ] || [ -z "$p" ] && break
            p=$(dirname "$p")
        done
    done
done </proc/self/cgroup
copy /sys/fs/cgroup/cgroup.controllers /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max \
    /sys/fs/cgroup/cpuset.cpus.effective

# Network: interfaces, InfiniBand/RoCE ports, and the PCI devices behind them.
for i in /sys/class/net/*; do
    copy "$i/mtu" "$i/speed" "$i/operstate" "$i/type"
    link "$i/device"
done
for d in /sys/class/infiniband/*; do
    copy "$d/node_type" "$d/fw_ver" "$d/hca_type"
    link "$d" "$d/device"
    for p in "$d"/ports/*; do
        copy "$p/state" "$p/phys_state" "$p/rate" "$p/link_layer"
    done
done

# PCI devices: NVIDIA (GPUs, NVSwitches), Mellanox/NVIDIA networking, and any
# device behind a network interface or an InfiniBand device.
for p in /sys/bus/pci/devices/*; do
    vendor=$(cat "$p/vendor" 2>/dev/null)
    wanted=0
    case "$vendor" in 0x10de | 0x15b3) wanted=1 ;; esac
    for l in /sys/class/net/*/device /sys/class/infiniband/*/device; do
        case "$(readlink -f "$l")/" in "$(readlink -f "$p")/"*) wanted=1 ;; esac
    done
    [ "$wanted" = 1 ] || continue
    copy "$p/vendor" "$p/device" "$p/class" "$p/numa_node" "$p/local_cpulist" \
        "$p/current_link_speed" "$p/current_link_width" "$p/max_link_speed" "$p/max_link_width"
    link "$p"
done

echo "captured $(find "$DEST" -type f | wc -l) files into $DEST" >&2
