//! `dynaspa devices`: every backend with its devices, or why it cannot run here. Exits 0 either
//! way: an unavailable backend is information, not an error.

use dynaspa::backends::{devices, DeviceListing};

#[derive(clap::Args)]
pub struct DevicesArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

fn text(l: &DeviceListing) -> String {
    match &l.devices {
        Err(why) => format!("{}: unavailable: {why}\n", l.backend),
        Ok(list) if list.is_empty() => format!("{}: no devices\n", l.backend),
        Ok(list) => {
            let mut s = format!("{}:\n", l.backend);
            for (i, d) in list.iter().enumerate() {
                let mut parts = vec![format!("{} compute units", d.compute_units)];
                if d.global_mem_bytes > 0 {
                    parts.push(mib(d.global_mem_bytes));
                }
                if d.local_mem_bytes > 0 {
                    parts.push(format!("{} KiB local/group", d.local_mem_bytes >> 10));
                }
                if d.kind != "cpu" {
                    parts.push(format!("{} work-items/group", d.max_work_group_size));
                }
                parts.push(format!("arch {}", d.arch));
                parts.push(d.driver.clone());
                s += &format!("  [{i}] {}{}: {}\n", d.name, if d.vendor.is_empty() { String::new() } else { format!(" ({})", d.vendor) }, parts.join(", "));
            }
            s
        }
    }
}

pub fn devices_cmd(a: DevicesArgs) -> dynaspa::Result<()> {
    let all = devices();
    if a.json {
        let j: Vec<serde_json::Value> = all
            .iter()
            .map(|l| match &l.devices {
                Ok(d) => serde_json::json!({"backend": l.backend, "available": true, "devices": d}),
                Err(why) => serde_json::json!({"backend": l.backend, "available": false, "reason": why}),
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&j).map_err(|e| dynaspa::Error::Other(e.to_string()))?);
    } else {
        for l in &all {
            print!("{}", text(l));
        }
    }
    Ok(())
}
