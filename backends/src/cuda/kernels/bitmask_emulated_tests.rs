//! bitmask.cu's logic without a GPU: `emulate_bitmask.cpp` runs the kernel source on CPU
//! threads (one per CUDA thread, barriers for __syncthreads and the warp votes), and its
//! outputs go through the same decoding and host comparison as on the GPU. Two block sizes:
//! 64 threads (two warps, many chunks per granularity) and 256. Skipped where there is no C++
//! compiler; NVRTC compiles the real thing in `nvrtc_tests`.

use super::bitmask::BitmaskPlan;
use crate::cuda::selfcheck::{blob_mask, compare_with_host, random_granularities, seed_from_env, Rng, BITMASK_SHAPES};
use dynaspa_runtime::sparsity::Granularity;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn build(dir: &Path, block: u32) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cuda/kernels");
    let out = dir.join(format!("emulate_bitmask_{block}"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let o = match Command::new(&cxx)
        .args(["-std=c++20", "-O1", "-pthread", &format!("-DBLOCK={block}"), "-o"])
        .arg(&out)
        .arg(src.join("emulate_bitmask.cpp"))
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no C++ compiler '{cxx}' ({e})");
            return None;
        }
    };
    assert!(o.status.success(), "{cxx} failed on emulate_bitmask.cpp:\n{}", String::from_utf8_lossy(&o.stderr));
    Some(out)
}

fn run(emu: &Path, plan: &BitmaskPlan, values: &[f32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut input: Vec<u8> = Vec::new();
    for v in [plan.height as u32, plan.width as u32, plan.granularities.len() as u32].iter().chain(&plan.params) {
        input.extend(v.to_le_bytes());
    }
    for v in values {
        input.extend(v.to_le_bytes());
    }
    let mut child = Command::new(emu).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "emulator exited with {}", o.status);
    let all: Vec<u32> = o.stdout.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let (words, rest) = all.split_at(plan.words);
    let (counts, tiles) = rest.split_at(plan.granularities.len() + 1);
    (words.to_vec(), counts.to_vec(), tiles.to_vec())
}

#[test]
fn emulated_bitmask_kernel_matches_the_host_bitmask() {
    let dir = std::env::temp_dir().join(format!("dynaspa-emu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seed = seed_from_env();
    let mut rng = Rng::new(seed);
    for block in [64, 256] {
        let Some(emu) = build(&dir, block) else { return };
        // The larger shapes cost seconds of thread switching here; the GPU self-check runs all.
        for &(h, w) in BITMASK_SHAPES.iter().filter(|(h, w)| h * w <= 13_000) {
            for density in [0.0, 0.05, 0.4, 1.0] {
                let gs = random_granularities(&mut rng);
                let values = if density == 1.0 { vec![1.0; h * w] } else { blob_mask(&mut rng, h, w, density) };
                let plan = BitmaskPlan::new(h, w, &gs).unwrap();
                let (words, counts, tiles) = run(&emu, &plan, &values);
                let got = plan.decode(words, &counts, &tiles, Some(&values)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                if let Err(e) = compare_with_host(&values, h, w, &gs, &got) {
                    panic!("BLOCK={block}, density {density}, seed {seed}: {e}");
                }
            }
        }
        // The first value that is not 0/1 is reported at its position, later ones ignored.
        let (h, w) = (29, 41);
        let mut values = blob_mask(&mut rng, h, w, 0.3);
        let bad = rng.range(0, h * w - 1);
        values[bad] = 0.5;
        values[bad + 1] = f32::NAN;
        let plan = BitmaskPlan::new(h, w, &[Granularity::new(2, 2)]).unwrap();
        let (words, counts, tiles) = run(&emu, &plan, &values);
        let e = plan.decode(words, &counts, &tiles, Some(&values)).unwrap_err().to_string();
        let host = dynaspa_runtime::sparsity::BitMask::from_f32(h, w, &values).unwrap_err().to_string();
        assert!(
            host.contains(&format!("(index {bad})")) && e.contains(&format!("(y {}, x {}) (index {bad}) is 0.5", bad / w, bad % w)),
            "{e} / {host}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
