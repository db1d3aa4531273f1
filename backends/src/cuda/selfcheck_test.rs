//! The GPU self-check as a test: runs where CUDA is present, skips elsewhere, and fails when
//! `DYNASPA_REQUIRE_BACKENDS` names `cuda` but CUDA is unavailable.

#[test]
fn cuda_selfcheck_passes_on_every_check() {
    if let Err(u) = super::probe() {
        let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "cuda"));
        assert!(!required, "DYNASPA_REQUIRE_BACKENDS names cuda, but: {u}");
        eprintln!("skipped: {u}");
        return;
    }
    let seed = super::selfcheck::seed_from_env();
    let mut lines = Vec::new();
    let failures = super::selfcheck::run_all(0, seed, &mut |name, o| {
        lines.push(match o {
            Ok(d) => format!("PASS {name}: {d}"),
            Err(e) => format!("FAIL {name}: {e}"),
        })
    });
    eprintln!("{}", lines.join("\n"));
    assert_eq!(failures, 0, "seed {seed}:\n{}", lines.join("\n"));
}
