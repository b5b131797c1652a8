//! `scripts/guest-image`, which builds the QEMU guest of the vhost-user and offload tests:
//! where the host's kernel can boot through QEMU's PVH entry it hands QEMU the kernel
//! uncompressed (under TCG the guest's own decompression was about half of its boot), made once
//! and kept for the next guest. Skipped, with the reason, where the image cannot be built (no
//! kernel image, no static busybox) or the kernel has no PVH entry.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/guest-image DIR JOB` with `TMPDIR` set to `tmp`: the kernel path it prints, or the
/// reason it gave for not building the image.
fn guest_image(dir: &Path, tmp: &Path) -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-image");
    let job = dir.join("job");
    std::fs::write(&job, "echo hello\n").unwrap();
    let out = Command::new(script)
        .arg(dir.join("guest"))
        .arg(&job)
        .env("TMPDIR", tmp)
        .output()
        .expect("run scripts/guest-image");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Whether the newest `/boot/vmlinuz-*` (the one guest-image takes) has a PVH entry.
fn newest_kernel_has_pvh() -> bool {
    let mut versions: Vec<String> = std::fs::read_dir("/boot")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("vmlinuz-").map(str::to_owned)
        })
        .collect();
    versions.sort_by_key(|v| version_key(v));
    versions.last().is_some_and(|v| {
        std::fs::read_to_string(format!("/boot/config-{v}"))
            .is_ok_and(|c| c.lines().any(|l| l == "CONFIG_PVH=y"))
    })
}

/// A kernel version's numbers in order, as `sort -V` compares them.
fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[test]
fn the_guest_kernel_is_handed_to_qemu_uncompressed_and_kept() {
    let test = "the_guest_kernel_is_handed_to_qemu_uncompressed_and_kept";
    let dir = std::env::temp_dir().join(format!("flowpath-guest-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let first = match guest_image(&dir, &tmp) {
        Ok(k) => k,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    if !newest_kernel_has_pvh() {
        eprintln!("SKIP {test}: the kernel has no PVH entry (CONFIG_PVH): /boot's image is used");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    assert!(
        first.starts_with(tmp.join("flowpath-guest-kernel")),
        "not the kept uncompressed kernel: {}",
        first.display()
    );
    let head = std::fs::read(&first).unwrap();
    assert_eq!(&head[..4], b"\x7fELF", "{} is not an ELF", first.display());
    let made = std::fs::metadata(&first).unwrap().modified().unwrap();
    // The next guest takes the same file, not a new one.
    let second = guest_image(&dir, &tmp).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        std::fs::metadata(&second).unwrap().modified().unwrap(),
        made
    );
    let kept = std::fs::read_dir(tmp.join("flowpath-guest-kernel"))
        .unwrap()
        .count();
    assert_eq!(kept, 1, "one kernel kept, no leftovers");
    let _ = std::fs::remove_dir_all(&dir);
}
