//! The checksum `ringio read` prints: the XOR of the file as little-endian u32 words, a final
//! partial word zero-padded. It is computed in pieces at any file offset (threads and blocks
//! never need to line up with words), and combined with `^`.
//!
//! A piece's value is a u32 whose byte `k` is the XOR of the piece's bytes at file offsets
//! ≡ k (mod 4): exactly the XOR of the words those bytes belong to. The body runs over u64
//! lanes (four accumulators, which LLVM vectorizes), so the checksum is never the bottleneck.

/// XOR of `data`, which starts at byte `offset` of the file.
pub fn xor_at(offset: u64, data: &[u8]) -> u32 {
    let mut acc = [0u8; 4];
    // Bytes until the file offset is 8-aligned, so every u64 of the body starts on a word.
    let head = ((8 - (offset % 8)) % 8).min(data.len() as u64) as usize;
    for (i, b) in data[..head].iter().enumerate() {
        acc[((offset + i as u64) % 4) as usize] ^= b;
    }
    let body = &data[head..];
    let mut lanes = [0u64; 4];
    let mut chunks = body.chunks_exact(32);
    for chunk in &mut chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            *lane ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
        }
    }
    let mut rest = chunks.remainder().chunks_exact(8);
    for word in &mut rest {
        lanes[0] ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
    }
    let folded = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    let mut word = (folded as u32) ^ ((folded >> 32) as u32);
    let tail_at = offset + head as u64 + (body.len() - rest.remainder().len()) as u64;
    for (i, b) in rest.remainder().iter().enumerate() {
        acc[((tail_at + i as u64) % 4) as usize] ^= b;
    }
    word ^= u32::from_le_bytes(acc);
    word
}

/// The printed form: 8 lowercase hex digits.
pub fn hex(x: u32) -> String {
    format!("{x:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, word by word.
    fn reference(data: &[u8]) -> u32 {
        data.chunks(4).fold(0, |x, w| {
            let mut b = [0u8; 4];
            b[..w.len()].copy_from_slice(w);
            x ^ u32::from_le_bytes(b)
        })
    }

    #[test]
    fn pieces_at_any_offset_combine_to_the_whole() {
        let data: Vec<u8> = (0..10_007u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let whole = reference(&data);
        assert_eq!(xor_at(0, &data), whole);
        for cut in [0, 1, 2, 3, 5, 8, 13, 4096, 9999, 10_007] {
            let (a, b) = data.split_at(cut);
            assert_eq!(xor_at(0, a) ^ xor_at(cut as u64, b), whole, "cut {cut}");
        }
        for size in 0..40 {
            assert_eq!(
                xor_at(0, &data[..size]),
                reference(&data[..size]),
                "size {size}"
            );
        }
    }
}
