//! The targets `goodput run` drives: the in-process engine, or an HTTP server (goodput's own
//! started in this process on loopback, or any OpenAI-compatible one).

use goodput_core::{ClientRecord, Clock, Stamp, Target, WorkRequest};

pub enum AnyTarget {
    Engine(goodput_engine::EngineHandle),
    Http(goodput_client::HttpTarget),
}

impl Target for AnyTarget {
    fn clock(&self) -> Clock {
        match self {
            AnyTarget::Engine(e) => e.clock(),
            AnyTarget::Http(h) => h.clock(),
        }
    }

    fn describe(&self) -> String {
        match self {
            AnyTarget::Engine(e) => e.describe(),
            AnyTarget::Http(h) => h.describe(),
        }
    }

    async fn run(&self, req: WorkRequest, intended: Stamp) -> ClientRecord {
        match self {
            AnyTarget::Engine(e) => e.run(req, intended).await,
            AnyTarget::Http(h) => h.run(req, intended).await,
        }
    }
}

/// The model's tokenizer as the HTTP client's codec.
pub struct Codec(pub std::sync::Arc<goodput_engine::tokenizer::Tokenizer>);

impl goodput_client::TextCodec for Codec {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.0.encode(text).map_err(|e| e.to_string())
    }
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.0.decode(ids).map_err(|e| e.to_string())
    }
}
