//! Paths into a JSON or TOML document.

/// One step of a path into a document.
#[derive(Clone, Debug)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A document of objects (tables) and arrays: `serde_json::Value` or `toml::Value`.
pub trait Tree: Sized {
    /// The node's children, each with the step to it (none for a scalar).
    fn children(&self) -> Vec<(Seg, &Self)>;
    /// The child at `seg`, if there is one.
    fn child_mut(&mut self, seg: &Seg) -> Option<&mut Self>;
}

impl Tree for serde_json::Value {
    fn children(&self) -> Vec<(Seg, &Self)> {
        match self {
            serde_json::Value::Object(m) => m.iter().map(|(k, c)| (Seg::Key(k.clone()), c)).collect(),
            serde_json::Value::Array(a) => a.iter().enumerate().map(|(i, c)| (Seg::Index(i), c)).collect(),
            _ => Vec::new(),
        }
    }
    fn child_mut(&mut self, seg: &Seg) -> Option<&mut Self> {
        match seg {
            Seg::Key(k) => self.get_mut(k.as_str()),
            Seg::Index(i) => self.get_mut(*i),
        }
    }
}

impl Tree for ::toml::Value {
    fn children(&self) -> Vec<(Seg, &Self)> {
        match self {
            ::toml::Value::Table(t) => t.iter().map(|(k, c)| (Seg::Key(k.clone()), c)).collect(),
            ::toml::Value::Array(a) => a.iter().enumerate().map(|(i, c)| (Seg::Index(i), c)).collect(),
            _ => Vec::new(),
        }
    }
    fn child_mut(&mut self, seg: &Seg) -> Option<&mut Self> {
        match seg {
            Seg::Key(k) => self.get_mut(k.as_str()),
            Seg::Index(i) => self.get_mut(*i),
        }
    }
}

/// Appends to `out` the path of every node of `v` (`here` is the path to `v`), parents first.
pub fn paths<V: Tree>(v: &V, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    for (seg, c) in v.children() {
        here.push(seg);
        paths(c, here, out);
        here.pop();
    }
}

/// Every path of `v`, the root's (empty) first.
pub fn all_paths<V: Tree>(v: &V) -> Vec<Vec<Seg>> {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    all
}

/// The node at `path` in `v`, if there is one.
pub fn node_mut<'a, V: Tree>(v: &'a mut V, path: &[Seg]) -> Option<&'a mut V> {
    path.iter().try_fold(v, |v, s| v.child_mut(s))
}
