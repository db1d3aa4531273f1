//! `--delta T` and its companions: delta mode's options as `run` and `bench` take them.

use dynaspa::{DeltaOptions, Spread};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct DeltaOpts {
    /// Delta mode: recompute only where the frame changed by more than T since the last
    /// computed frame (in the model input's units, after --mean/--std), keeping the last
    /// activations elsewhere; 0 recomputes every position that changed at all.
    #[arg(long, value_name = "T")]
    pub delta: Option<f32>,
    /// Delta mode: mark changes in blocks of B x B positions.
    #[arg(long, value_name = "B", default_value_t = 1, requires = "delta", value_parser = clap::value_parser!(u32).range(1..))]
    pub delta_block: u32,
    /// Delta mode: compute a whole frame every N frames (0: only when --delta-max-changed says so).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "delta")]
    pub delta_refresh: u32,
    /// Delta mode: compute a whole frame when more than this fraction of positions changed.
    #[arg(long, value_name = "F", default_value_t = 0.5, requires = "delta")]
    pub delta_max_changed: f32,
    /// Delta mode: how far a change reaches. `window`: every output whose conv or pool window
    /// read a changed position is recomputed (results equal dense at T = 0); `stride`: only the
    /// changed positions at each resolution, neighbours keep their last values and norms over
    /// the plane the last whole frame's statistics (SIGE's way with an edit: much less work,
    /// small errors beside the change; --check shows them).
    #[arg(long, value_name = "HOW", default_value = "window", value_parser = parse_spread)]
    pub delta_spread: Spread,
}

fn parse_spread(s: &str) -> Result<Spread, String> {
    match s {
        "window" => Ok(Spread::Window),
        "stride" => Ok(Spread::Stride),
        _ => Err(format!("'{s}' is not a spread: window or stride")),
    }
}

impl DeltaOpts {
    /// The library's options for frames fed to `frame_input` (`None`: the model's only frame
    /// input); `None` without --delta.
    pub fn options(&self, frame_input: Option<&str>) -> Option<DeltaOptions> {
        self.delta.map(|t| DeltaOptions {
            threshold: t,
            block: self.delta_block as usize,
            refresh_every: self.delta_refresh as usize,
            max_changed: self.delta_max_changed,
            input: frame_input.map(str::to_string),
            spread: self.delta_spread,
        })
    }
}
