//! all-MiniLM-L6-v2 from PyPI: unit-length embeddings where related sentences are closer than
//! unrelated ones.

use candle_core::Device;
use goodput_engine::encoder::Encoder;
use goodput_engine::EngineError;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn minilm_embeds_related_sentences_closer() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/fetch-minilm.sh");
    let out = Command::new("bash").arg(script).output().expect("run fetch-minilm.sh");
    assert!(out.status.success(), "fetch-minilm.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let enc = Encoder::load(&dir, &Device::Cpu).unwrap();
    assert_eq!(enc.dim, 384);
    let v = enc
        .embed(&["The cat sits on the mat.", "A cat is sitting on a rug.", "Quarterly revenue grew by 8 percent."])
        .unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for e in &v {
        assert!((dot(e, e) - 1.0).abs() < 1e-4, "unit length");
    }
    let (related, unrelated) = (dot(&v[0], &v[1]), dot(&v[0], &v[2]));
    assert!(related > 0.5 && related > unrelated + 0.3, "related {related}, unrelated {unrelated}");
    let e = Encoder::load(&dir.join("nowhere"), &Device::Cpu).err().unwrap();
    assert!(
        matches!(&e, EngineError::File { what: "sentence encoder file", path, .. } if path.ends_with("config.json")),
        "{e:?}"
    );
}
