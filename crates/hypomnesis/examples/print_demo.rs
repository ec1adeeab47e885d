//! Snapshot before and after allocating (and touching) 256 MiB, then print every formatter of
//! the `report` feature. Run: `cargo run --example print_demo --features report`.
//!
//! This example's own lines say MiB; the formatters' lines say "MB", which there means MiB
//! too: their formats are hypomnesis 0.2.4's, byte for byte, and programs parse them.

use hypomnesis::{MemoryReport, Snapshot};

fn main() -> hypomnesis::Result<()> {
    let before = Snapshot::now(0)?;
    let block = vec![1_u8; 256 << 20];
    let block = std::hint::black_box(block);
    let after = Snapshot::now(0)?;
    println!(
        "RAM before {:.0} MiB, after {:.0} MiB",
        before.ram_mb(),
        after.ram_mb()
    );
    let mine = match (after.vram_mb(), &after.gpu) {
        (Some(v), Some(g)) if g.is_per_process => format!("{v:.0} MiB"),
        (Some(v), _) => format!("not attributable here; the whole device uses {v:.0} MiB"),
        (None, _) => "unknown (no GPU source answered)".to_string(),
    };
    println!("VRAM of this process: {mine}");
    if let Some(d) = &after.gpu_device {
        print!("{}", d.format_free());
        print!("{}", d.format_total());
        print!("{}", d.format_used());
        d.print_free();
    } else {
        println!("  (no GPU device figures on this host)");
    }
    let report = MemoryReport::new(before, after);
    let vram = report
        .vram_delta_mb()
        .map_or_else(|| "unknown".to_string(), |v| format!("{v:+.0} MiB"));
    println!("delta {:+.0} MiB RAM, VRAM {vram}", report.ram_delta_mb());
    print!("{}", report.format_delta("256 MiB block"));
    print!("{}", report.format_before_after("256 MiB block"));
    report.print_delta("256 MiB block");
    report.print_before_after("256 MiB block");
    drop(block);
    Ok(())
}
