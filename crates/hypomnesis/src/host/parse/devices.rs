//! `/proc/devices`: the major number each character and block driver has, as
//! `Character devices:` then `Block devices:`, one `<major> <name>` a line. NVIDIA's GPU
//! device files are the character major named `nvidia-frontend` (or `nvidia` on drivers that
//! register under that name), its unified-memory device `nvidia-uvm`.

/// The character major registered under `name` (the first such line); `None` when there is
/// none, or only a block device has that name.
#[must_use]
pub fn char_major(text: &str, name: &str) -> Option<u32> {
    let mut in_char = false;
    for line in text.lines() {
        let line = line.trim();
        if line.ends_with(':') {
            in_char = line == "Character devices:";
            continue;
        }
        if !in_char {
            continue;
        }
        let Some((major, driver)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        if driver.trim() == name
            && let Ok(m) = major.parse::<u32>()
        {
            return Some(m);
        }
    }
    None
}

/// The character major of NVIDIA's GPU device files (`nvidia-frontend`, else `nvidia`).
#[must_use]
pub fn nvidia_gpu_major(text: &str) -> Option<u32> {
    char_major(text, "nvidia-frontend").or_else(|| char_major(text, "nvidia"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As a node with NVIDIA's modules loaded has it (majors from a real one: the GPU
    /// devices 195, the unified-memory device a dynamic major).
    const NODE: &str = "Character devices:\n  1 mem\n  4 /dev/vc/0\n  5 /dev/ptmx\n195 nvidia-frontend\n508 nvidia-uvm\n509 nvidia-caps\n\nBlock devices:\n  8 sd\n259 blkext\n 77 nvidia\n";

    #[test]
    fn the_majors_of_nvidias_devices() {
        assert_eq!(nvidia_gpu_major(NODE), Some(195));
        assert_eq!(char_major(NODE, "nvidia-uvm"), Some(508));
        assert_eq!(char_major(NODE, "mem"), Some(1));
        assert_eq!(
            char_major(NODE, "/dev/ptmx"),
            Some(5),
            "a name with a slash"
        );
        assert_eq!(
            char_major(NODE, "sd"),
            None,
            "a block device is not a character one"
        );
        // A driver registered as `nvidia`; the block list's `nvidia` never counts.
        let old = "Character devices:\n195 nvidia\n";
        assert_eq!(nvidia_gpu_major(old), Some(195));
        assert_eq!(
            nvidia_gpu_major("Character devices:\n  1 mem\n\nBlock devices:\n 77 nvidia\n"),
            None
        );
        assert_eq!(nvidia_gpu_major(""), None);
        assert_eq!(
            nvidia_gpu_major("Character devices:\nx nvidia\n-1 nvidia\n"),
            None
        );
    }
}
