"""Launch aisp's own lesson kernels (kernels/*.cu, the code `aisp_benchmark_run` compiles with
NVRTC) once each, with the lessons' launch shapes, so that Nsight Compute can profile them.

  python3 ncu_lessons.py [--kernels DIR] [--pair before|after]

Default: every baseline and optimized variant of memory_coalescing (copy_f32_strided, copy_f32),
warp_divergence (divergent_branch, predicated_select) and transpose_bank_conflicts (transpose_naive,
transpose_tiled, transpose_tiled_padded), small size. `--pair before` launches only the baselines and
`--pair after` only the final optimized variants, each under the same neutral name (`lesson_copy`,
`lesson_branch`, `lesson_transpose`), so that two reports of "the same kernels" before and after a
fix can be compared kernel by kernel. Needs CuPy (NVRTC) and a CUDA GPU.
"""
import argparse
import os
import re

import cupy as cp

HERE = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("--kernels", default=os.path.join(HERE, "..", "kernels"))
p.add_argument("--pair", choices=["before", "after"])
a = p.parse_args()


def source(files, rename=None):
    text = open(os.path.join(a.kernels, "common.cuh")).read()
    for f in files:
        text += "\n" + open(os.path.join(a.kernels, f)).read()
    for old, new in (rename or {}).items():
        text = re.sub(r"\b%s\b" % old, new, text)
    return text


dev = cp.cuda.Device(0)
sms = dev.attributes["MultiProcessorCount"]
N = 4 << 20  # the lessons' "small" size
DIM = 4096
DIV_ITERS = 128
x = cp.random.uniform(-1, 1, N, dtype=cp.float32)
y = cp.empty_like(x)
m = cp.random.uniform(-1, 1, DIM * DIM, dtype=cp.float32)
mt = cp.empty_like(m)


def grid_stride(fn, items):
    # aisp's launch_grid_stride: SMs x resident blocks of 256 threads, no more than the items need.
    per_sm = max(1, 2048 // 256)
    return (min(sms * per_sm, (items + 255) // 256),), (256,)


def run(name, fn, grid, block, args):
    fn(grid, block, args)
    cp.cuda.runtime.deviceSynchronize()
    print(f"launched {name} grid={grid} block={block}", flush=True)


def all_variants():
    mem = cp.RawModule(code=source(["memory.cu"]), options=("-std=c++17",))
    comp = cp.RawModule(code=source(["compute.cu"]), options=("-std=c++17",))
    tr = cp.RawModule(code=source(["transpose.cu"]), options=("-std=c++17",))
    f = mem.get_function("copy_f32_strided")
    run("copy_f32_strided", f, *grid_stride(f, N), (x, y, cp.uint64(N), cp.uint32(32)))
    f = mem.get_function("copy_f32")
    run("copy_f32", f, *grid_stride(f, N), (x, y, cp.uint64(N)))
    for k in ["divergent_branch", "predicated_select"]:
        f = comp.get_function(k)
        run(k, f, *grid_stride(f, N), (x, y, cp.uint64(N), cp.uint32(DIV_ITERS)))
    for k in ["transpose_naive", "transpose_tiled", "transpose_tiled_padded"]:
        f = tr.get_function(k)
        run(k, f, (DIM // 32, DIM // 32), (32, 8), (m, mt, cp.uint32(DIM), cp.uint32(DIM)))


def pair(which):
    before = which == "before"
    ren_mem = {"copy_f32_strided" if before else "copy_f32": "lesson_copy"}
    ren_div = {"divergent_branch" if before else "predicated_select": "lesson_branch"}
    ren_tr = {"transpose_naive" if before else "transpose_tiled_padded": "lesson_transpose"}
    mem = cp.RawModule(code=source(["memory.cu"], ren_mem), options=("-std=c++17",))
    comp = cp.RawModule(code=source(["compute.cu"], ren_div), options=("-std=c++17",))
    tr = cp.RawModule(code=source(["transpose.cu"], ren_tr), options=("-std=c++17",))
    f = mem.get_function("lesson_copy")
    args = (x, y, cp.uint64(N), cp.uint32(32)) if before else (x, y, cp.uint64(N))
    run("lesson_copy", f, *grid_stride(f, N), args)
    f = comp.get_function("lesson_branch")
    run("lesson_branch", f, *grid_stride(f, N), (x, y, cp.uint64(N), cp.uint32(DIV_ITERS)))
    f = tr.get_function("lesson_transpose")
    run("lesson_transpose", f, (DIM // 32, DIM // 32), (32, 8), (m, mt, cp.uint32(DIM), cp.uint32(DIM)))


if a.pair:
    pair(a.pair)
else:
    all_variants()
print("done", flush=True)
