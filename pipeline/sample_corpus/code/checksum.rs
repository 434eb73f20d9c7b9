//! Streams files and prints a CRC-32 (IEEE) checksum and size for each,
//! in the style of `cksum`. No external crates: the table is built at start.

use std::env;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::process::ExitCode;

struct Crc32 {
    table: [u32; 256],
}

impl Crc32 {
    fn new() -> Self {
        let mut table = [0u32; 256];
        for (i, entry) in table.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
            *entry = c;
        }
        Crc32 { table }
    }

    fn checksum<R: Read>(&self, mut reader: R) -> io::Result<(u32, u64)> {
        let mut crc = 0xFFFF_FFFFu32;
        let mut total = 0u64;
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            for &byte in &buf[..n] {
                crc = self.table[((crc ^ byte as u32) & 0xFF) as usize] ^ (crc >> 8);
            }
            total += n as u64;
        }
        Ok((crc ^ 0xFFFF_FFFF, total))
    }
}

fn main() -> ExitCode {
    let crc = Crc32::new();
    let mut failed = false;
    for path in env::args().skip(1) {
        match File::open(&path).and_then(|f| crc.checksum(BufReader::new(f))) {
            Ok((sum, size)) => println!("{sum:08x} {size} {path}"),
            Err(err) => {
                eprintln!("{path}: {err}");
                failed = true;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_value() {
        let (sum, size) = Crc32::new().checksum(&b"123456789"[..]).unwrap();
        assert_eq!(sum, 0xCBF4_3926);
        assert_eq!(size, 9);
    }
}
