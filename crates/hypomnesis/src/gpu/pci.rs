//! PCI addresses, as every source spells them: NVML's `00000000:18:00.0`, sysfs's and DRM
//! fdinfo's `0000:18:00.0`, a bus id without domain `18:00.0`, and the D3DKMT adapter address
//! (bus, device, function). One type, so devices can be matched across sources.

use std::fmt;

/// Where a PCI device sits: `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI domain (segment); 0 when the spelling has none.
    pub domain: u32,
    /// Bus number.
    pub bus: u32,
    /// Device number on the bus.
    pub device: u32,
    /// Function number of the device.
    pub function: u32,
}

impl PciAddress {
    /// Parses `[domain:]bus:device.function` in hexadecimal, with any number of domain digits;
    /// `None` for anything else.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (rest, function) = s.rsplit_once('.')?;
        let mut parts = rest.rsplitn(3, ':');
        let device = hex(parts.next()?)?;
        let bus = hex(parts.next()?)?;
        let domain = match parts.next() {
            Some(d) => hex(d)?,
            None => 0,
        };
        Some(Self {
            domain,
            bus,
            device,
            function: hex(function)?,
        })
    }
}

/// Hex digits only (`from_str_radix` alone would take a sign: `+1f`).
fn hex(s: &str) -> Option<u32> {
    if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

impl fmt::Display for PciAddress {
    /// The sysfs spelling: `0000:18:00.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(domain: u32, bus: u32, device: u32, function: u32) -> PciAddress {
        PciAddress {
            domain,
            bus,
            device,
            function,
        }
    }

    #[test]
    fn every_spelling() {
        assert_eq!(
            PciAddress::parse("00000000:18:00.0"),
            Some(at(0, 0x18, 0, 0))
        );
        assert_eq!(PciAddress::parse("0000:03:00.1"), Some(at(0, 3, 0, 1)));
        assert_eq!(
            PciAddress::parse(" 0001:2A:1f.7\n"),
            Some(at(1, 0x2A, 0x1F, 7))
        );
        assert_eq!(PciAddress::parse("18:00.0"), Some(at(0, 0x18, 0, 0)));
        for bad in [
            "",
            "18:00",
            "x:18:00.0",
            "0000:18:00.g",
            "1:2:3:4.0",
            "0000:18:-1.0",
            "0000:+18:00.0",
            "0000::00.0",
        ] {
            assert_eq!(PciAddress::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn shown_as_sysfs_does() {
        assert_eq!(at(0, 0x18, 0, 0).to_string(), "0000:18:00.0");
        let nvml = PciAddress::parse("00000000:2A:00.0").unwrap_or(at(9, 9, 9, 9));
        assert_eq!(nvml.to_string(), "0000:2a:00.0");
        assert_eq!(
            PciAddress::parse(&nvml.to_string()),
            Some(nvml),
            "round trip"
        );
    }
}
