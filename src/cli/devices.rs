//! `dynaspa devices`: every backend of this build and the devices it can run on.

use dynaspa::backends::{devices, DeviceListing};

#[derive(clap::Args)]
pub struct DevicesArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn mib(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn line(d: &DeviceListing) -> String {
    let libs = d.libraries.as_deref().map(|l| format!("; {l}")).unwrap_or_default();
    if let Some(why) = &d.unavailable {
        return format!("{:<7} unavailable: {why}{libs}", d.backend);
    }
    let Some(i) = &d.info else {
        return format!("{:<7} (no details)", d.backend);
    };
    if d.backend == "cpu" {
        return format!("{:<7} {} ({} threads)", d.backend, i.name, i.compute_units);
    }
    format!(
        "{:<7} [{}] {} ({}, {}){}: {} compute units, {} local memory, work-groups up to {}, {} global memory, {}, driver {}",
        d.backend,
        d.selector.as_deref().unwrap_or("-"),
        i.name,
        i.kind,
        i.vendor,
        d.platform.as_deref().map(|p| format!(" on {p}")).unwrap_or_default(),
        i.compute_units,
        mib(i.local_mem_bytes),
        i.max_work_group_size,
        mib(i.global_mem_bytes),
        i.arch,
        i.driver,
    ) + &libs
}

pub fn devices_cmd(a: DevicesArgs) -> dynaspa::Result<()> {
    let list = devices();
    if a.json {
        let s = serde_json::to_string_pretty(&list).map_err(|e| dynaspa::Error::Other(e.to_string()))?;
        println!("{s}");
    } else {
        for d in &list {
            println!("{}", line(d));
        }
    }
    Ok(())
}
