/* The knobs of sparse_conv_gemm.cl (TM, TN, TK, WM, WN, KS, WK, the finish and the
 * self-listing modes; the granularity is sparse_conv_common.h's) with their defaults, and the
 * shapes derived from them. Compiled after sparse_conv_common.h (gpu/kernels.rs). */

#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 32
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 2
#endif
/* Split of the reduction (input channels x taps) over KS work-groups; KS > 1 writes partial
 * sums that sparse_conv_finish_f32 adds up, so few columns still fill the device. */
#ifndef KS
#define KS 1
#endif
/* FUSED_FINISH = 1: the last of a tile's KS work-groups to finish adds the partial sums itself
 * (sparse_conv_gemm_f32 then takes tile_count, see there), saving the second launch, which costs
 * about as much as a sparse frame's GEMM on NVIDIA. It needs one work-group's stores to be
 * visible to another once a fence and an atomic order them: CUDA's memory model promises it;
 * OpenCL 1.2 leaves it to the device: NVIDIA's gives it with PTX's device-wide fence
 * (prelude_opencl.h; its mem_fence is the work-group's only), PoCL's (a coherent CPU) with
 * any; WGSL does not promise it, so its twin never fuses. Self-listing members never fuse
 * (see SELF_LIST). */
#ifndef FUSED_FINISH
#define FUSED_FINISH 0
#endif
/* SELF_LIST = 1 (1x1 columns only): each work-group finds its columns in the float mask itself
 * instead of reading bitmask.cl's list, so the member does not wait for the mask launch, which
 * on an H100 cost ~6 µs in front of a 25-50 µs member, 2 µs of it the price of any dependent
 * launch (RESULTS.md, "the mask launch in front of the member"). The mask is read as bitmask.cl
 * reads it (set where exactly 1.0), and `masked` is 0: every column is a set position. The grid
 * runs column tiles slowest (see SPARSE_CONV_CTILE), so the work-groups past the frame's columns, which
 * read the mask before they know, queue behind the ones with work instead of between them. With KS > 1
 * the GEMM publishes the count and list at `meta`, a buffer of the op's laid out as
 * sparse_conv_finish_f32 reads a list (count of image n at n, its list at data0 + n * img_stride),
 * for the finish launched after it: self-listing members do not fuse their finish (on an H200
 * the fused ones were no faster, and PoCL 3.1 stored their outputs from the wrong column). */
#ifndef SELF_LIST
#define SELF_LIST 0
#endif
#if SELF_LIST && FUSED_FINISH
#error "self-listing members finish a split reduction in a second launch"
#endif
/* SELF_COUNT = 1 (with SELF_LIST): the work-group of channel tile 0, split 0 and column tile 0 of
 * each image also stores what the mask's bitmask launch stores for the host's selection, the
 * image's count of set values and its first position holding neither 0 nor 1 (-1 for none), at
 * rep[n * rep_stride] and rep[n * rep_stride + rep_stride - 1] (a mask planned with 1x1 tiles
 * only, whose counts are those two). Where every reader of the mask does, the frame makes no
 * bitmask launch at all (step.rs). */
#ifndef SELF_COUNT
#define SELF_COUNT 0
#endif
#if SELF_COUNT && !SELF_LIST
#error "only self-listing members count the mask"
#endif
/* SPARSE_CONV_CSLOW (sparse members): column tiles are the grid's slowest dimension, in the GEMM and in
 * sparse_conv_finish_f32. Both grids are sized for every column the map could have; a sparse frame's
 * columns are the first few tiles, so with column tiles fastest the few working work-groups
 * were strewn among the many that only read the count and leave, and the last of them started
 * only once the empty ones ahead had drained through the GPU. Slowest, the working groups come
 * first and the empty ones queue behind them (the fastest conv3x3 member at density 0.1 21.5
 * against 25.9 µs on NVIDIA's OpenCL, 0.5-0.6 µs faster on CUDA). SELF_LIST needs it. */
#define SPARSE_CONV_CSLOW (TILED || SELF_LIST)
#define TX (TN / WN)
#define TY (TM / WM)
/* WK > 1: the work-group is WK slices of TX x TY work-items (local size (TX, TY, WK)). Every
 * slice owns the whole TM x TN tile and takes TK / WK of each stage's reduction indices; the
 * slices' sums meet in local memory before the stores. All of the group's work-items load the
 * stages together, so a stage costs each fewer loads. A split reduction (KS > 1) gives a sparse
 * frame's few columns the same parallelism, but through partial sums in global memory and a
 * second launch to add them. On an H200 sliced members with the stage pipeline only tied the
 * split ones on conv1x1 at density 0.1 (their per-element stage loads issued ~2.5x the
 * instructions of a hand-written kernel); run as one stage (SPARSE_CONV_ONE_STAGE) they beat them at
 * batches 1 and 2 (RESULTS.md, "Work-groups in slices along the reduction" and "One stage
 * against the pipeline"). Not with a split or in the WGSL twin. */
#ifndef WK
#define WK 1
#endif
#define SPARSE_CONV_NS (TX * TY)
#define NT (SPARSE_CONV_NS * WK)
/* The work-item's index in the work-group (its slice's items first). */
#define SPARSE_CONV_TID() (((WK > 1 ? LOCAL_ID(2) * TY : 0) + LOCAL_ID(1)) * TX + LOCAL_ID(0))
#if WK > 1 && (KS > 1 || TK % WK != 0)
#error "WK > 1 needs KS = 1 and WK dividing TK"
#endif
/* SPARSE_CONV_ONE_STAGE = 1 (the host asks for sliced members whose one stage holds the op's whole
 * reduction, sparse_conv/lower.rs): no software pipeline. The tile's weights are loaded as float4
 * before the PDL wait (they are the model's constants: no launch writes them), and every
 * column's inputs for the whole reduction are gathered at once, so the work-group waits for
 * global memory twice (the mask's listing, then the gather) instead of once per stage, and
 * holds no prefetch registers. The reduction must fit in TK (the host checks): indices past it
 * are never read. */
#ifndef SPARSE_CONV_ONE_STAGE
#define SPARSE_CONV_ONE_STAGE 0
#endif
#if SPARSE_CONV_ONE_STAGE && (KS > 1 || NT % TN != 0 || TM % 4 != 0)
#error "SPARSE_CONV_ONE_STAGE needs KS = 1, whole columns per work-item row (NT % TN == 0) and TM % 4 == 0"
#endif
#define NACC (WM * WN)

/* A work-item's WM x WN outputs are runs of VWM consecutive channels and VWN consecutive
 * columns, the runs TY * VWM channels and TX * VWN columns apart, so each reduction step reads
 * a run from As / Bs in one vector load. Read one float at a time, a step's WM + WN loads of
 * local memory took longer to issue than its WM x WN FMAs (w8x4: 12 loads for 32 FMAs), which
 * bounded the compute-bound members. Runs of 4 are 16 bytes apart between neighbouring
 * work-items, so a quarter-warp's loads cover 32 banks once. */
#define VWM (WM % 4 == 0 ? 4 : WM % 2 == 0 ? 2 : 1)
#define VWN (WN % 4 == 0 ? 4 : WN % 2 == 0 ? 2 : 1)
#define SPARSE_CONV_LDS_A(d, s) LDS_RUN(d, s, VWM)
#define SPARSE_CONV_LDS_B(d, s) LDS_RUN(d, s, VWN)
