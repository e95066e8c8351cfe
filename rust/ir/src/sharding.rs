//! Named mesh axes and partition specs, and the GSPMD sharding text (`HloSharding`) of a
//! partition spec on a mesh.
//!
//! A mesh is a list of named axes with sizes. Its devices are numbered row-major over the
//! axes (the last axis varies fastest), and partition `i` of a compiled program is the
//! mesh's device `i`: the runtime compiles with that device assignment, so the IR never
//! needs device ids, only the axes.

use std::fmt;
use std::sync::Arc;

/// A mesh: named axes with sizes, in order (JAX's `Mesh('x': 2, 'y': 2, ...)`). Every axis
/// is of type `Auto` (the only one the IR knows).
///
/// # Examples
/// ```
/// use ferrax_ir::{Mesh, ShardingError};
/// use std::sync::Arc;
/// let mesh = Mesh::new([("x", 2), ("y", 3)])?;
/// assert_eq!(mesh.size(), 6);
/// assert_eq!((mesh.axis_index("y"), mesh.axis_size("y")), (Some(1), Some(3)));
/// assert_eq!(mesh.to_string(), "Mesh('x': 2, 'y': 3, axis_types=(Auto, Auto))");
/// // Devices are numbered row-major: device 4 is at x=1, y=1.
/// assert_eq!((mesh.coordinate(4, 0), mesh.coordinate(4, 1)), (1, 1));
/// // The replica groups of a collective over `y`: devices that differ only along `y`.
/// let y: Arc<str> = Arc::from("y");
/// assert_eq!(mesh.groups(&[y])?, [vec![0, 1, 2], vec![3, 4, 5]]);
/// assert_eq!(
///     Mesh::new([("x", 2), ("x", 2)]),
///     Err(ShardingError::DuplicateMeshAxis("x".into()))
/// );
/// # Ok::<(), ShardingError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Mesh {
    axes: Vec<(Arc<str>, i64)>,
}

/// Why a mesh or a partition spec is not valid.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardingError {
    /// Two mesh axes have the same name.
    DuplicateMeshAxis(String),
    /// A mesh axis has a size below 1.
    BadAxisSize(String, i64),
    /// The mesh has more devices than an `i64` holds.
    MeshTooLarge,
    /// The axis names and axis sizes given differ in number.
    AxisCountMismatch(usize, usize),
    /// A spec names an axis the mesh does not have.
    UnknownAxis(String),
    /// A spec uses an axis twice.
    AxisUsedTwice(String),
    /// A spec shards a dimension the array does not have.
    TooManyEntries {
        /// Entries in the spec.
        entries: usize,
        /// The array's rank.
        rank: usize,
    },
}

impl fmt::Display for ShardingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardingError::DuplicateMeshAxis(n) => write!(f, "mesh axis name '{n}' is repeated"),
            ShardingError::BadAxisSize(n, s) => {
                write!(f, "mesh axis '{n}' has size {s}; sizes must be at least 1")
            }
            ShardingError::MeshTooLarge => f.write_str("the mesh has too many devices"),
            ShardingError::AxisCountMismatch(a, b) => {
                write!(f, "{a} axis names but {b} axis sizes")
            }
            ShardingError::UnknownAxis(n) => write!(
                f,
                "resource axis '{n}' of the partition spec is not found in the mesh"
            ),
            ShardingError::AxisUsedTwice(n) => write!(
                f,
                "a partition spec can't use mesh axis '{n}' more than once"
            ),
            ShardingError::TooManyEntries { entries, rank } => write!(
                f,
                "the partition spec has {entries} entries, sharding dimensions the rank-{rank} \
                 array does not have"
            ),
        }
    }
}

impl std::error::Error for ShardingError {}

impl Mesh {
    /// A mesh of these axes, in order; names unique, sizes at least 1.
    pub fn new<N: AsRef<str>>(
        axes: impl IntoIterator<Item = (N, i64)>,
    ) -> Result<Mesh, ShardingError> {
        let mut out: Vec<(Arc<str>, i64)> = Vec::new();
        let mut total: i64 = 1;
        for (n, s) in axes {
            let n = n.as_ref();
            if out.iter().any(|(m, _)| &**m == n) {
                return Err(ShardingError::DuplicateMeshAxis(n.to_owned()));
            }
            if s < 1 {
                return Err(ShardingError::BadAxisSize(n.to_owned(), s));
            }
            total = total.checked_mul(s).ok_or(ShardingError::MeshTooLarge)?;
            out.push((Arc::from(n), s));
        }
        Ok(Mesh { axes: out })
    }

    /// A mesh from parallel lists of names and sizes.
    pub fn from_names_sizes<N: AsRef<str>>(
        names: &[N],
        sizes: &[i64],
    ) -> Result<Mesh, ShardingError> {
        if names.len() != sizes.len() {
            return Err(ShardingError::AxisCountMismatch(names.len(), sizes.len()));
        }
        Mesh::new(names.iter().map(|n| n.as_ref()).zip(sizes.iter().copied()))
    }

    /// The axes (name, size) in order.
    pub fn axes(&self) -> &[(Arc<str>, i64)] {
        &self.axes
    }

    /// The number of devices (the product of the sizes; 1 for no axes).
    pub fn size(&self) -> i64 {
        self.axes.iter().map(|(_, s)| *s).product()
    }

    /// The position of an axis.
    pub fn axis_index(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|(n, _)| &**n == name)
    }

    /// The size of an axis.
    pub fn axis_size(&self, name: &str) -> Option<i64> {
        self.axis_index(name).map(|i| self.axes[i].1)
    }

    /// The stride of an axis in device numbering (row-major: the product of the sizes of
    /// the axes after it).
    pub fn axis_stride(&self, i: usize) -> i64 {
        self.axes[i + 1..].iter().map(|(_, s)| *s).product()
    }

    /// The coordinate along axis `i` of device `d`.
    pub fn coordinate(&self, device: i64, i: usize) -> i64 {
        (device / self.axis_stride(i)) % self.axes[i].1
    }

    /// Groups of devices that differ only along the named axes (in the order given: the
    /// position in a group is the row-major index over those axes), one group per
    /// combination of the other axes, in increasing order of their first device. These
    /// are the `replica_groups` of a collective over `names`.
    pub fn groups(&self, names: &[Arc<str>]) -> Result<Vec<Vec<i64>>, ShardingError> {
        let mut idx = Vec::with_capacity(names.len());
        for n in names {
            let i = self
                .axis_index(n)
                .ok_or_else(|| ShardingError::UnknownAxis(n.to_string()))?;
            if idx.contains(&i) {
                return Err(ShardingError::AxisUsedTwice(n.to_string()));
            }
            idx.push(i);
        }
        let others: Vec<usize> = (0..self.axes.len()).filter(|i| !idx.contains(i)).collect();
        let order: Vec<usize> = others.iter().chain(idx.iter()).copied().collect();
        let group_size: i64 = idx.iter().map(|&i| self.axes[i].1).product();
        let devices = self.enumerate(&order);
        Ok(devices
            .chunks(group_size.max(1) as usize)
            .map(|c| c.to_vec())
            .collect())
    }

    /// The device ids in row-major order over the axes in `order` (a permutation of the
    /// axis positions): the mesh's device array transposed to that order and flattened.
    pub fn enumerate(&self, order: &[usize]) -> Vec<i64> {
        let n = self.size().max(0) as usize;
        let mut out = Vec::with_capacity(n);
        let sizes: Vec<i64> = order.iter().map(|&i| self.axes[i].1).collect();
        let strides: Vec<i64> = order.iter().map(|&i| self.axis_stride(i)).collect();
        let mut coord = vec![0i64; order.len()];
        for _ in 0..n {
            out.push(coord.iter().zip(&strides).map(|(c, s)| c * s).sum());
            for k in (0..coord.len()).rev() {
                coord[k] += 1;
                if coord[k] < sizes[k] {
                    break;
                }
                coord[k] = 0;
            }
        }
        out
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Mesh(")?;
        for (n, s) in &self.axes {
            write!(f, "{}: {s}, ", quote(n))?;
        }
        if !self.axes.is_empty() {
            f.write_str("axis_types=(")?;
            for i in 0..self.axes.len() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str("Auto")?;
            }
            if self.axes.len() == 1 {
                f.write_str(",")?;
            }
            f.write_str(")")?;
        }
        f.write_str(")")
    }
}

/// A name as Python's `repr` of a str prints it: in single quotes, with `\` and `'`
/// escaped (axis names are identifiers in practice).
pub fn quote(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('\'');
    for c in name.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\'' => s.push_str("\\'"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.push('\'');
    s
}

/// A partition spec (JAX's `P(...)`): per array dimension, the mesh axes it is split over
/// (none: not split). JAX prints an entry of one axis as the bare name, so `P(('x',))`
/// and `P('x')` are the same spec.
///
/// # Examples
/// ```
/// use ferrax_ir::{Mesh, PartitionSpec, ShardingError};
/// let mesh = Mesh::new([("x", 2), ("y", 4)])?;
/// // P(None, 'y'): rows whole, columns split four ways over `y`.
/// let spec = PartitionSpec::new(vec![vec![], vec!["y".into()]]);
/// assert_eq!(spec.to_string(), "P(None, 'y')");
/// spec.check(&mesh, 2)?;
/// assert_eq!((spec.tiles(&mesh, 0), spec.tiles(&mesh, 1)), (1, 4));
/// assert_eq!(spec.unused_axes(&mesh), [0]); // each tile is held by both `x` rows
/// // An axis the mesh lacks, or one more dimension than the array has, is refused.
/// let bad = PartitionSpec::new(vec![vec!["z".into()]]);
/// assert_eq!(bad.check(&mesh, 1), Err(ShardingError::UnknownAxis("z".into())));
/// assert!(spec.check(&mesh, 1).is_err());
/// assert_eq!(PartitionSpec::replicated().to_string(), "P()");
/// # Ok::<(), ShardingError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct PartitionSpec {
    entries: Vec<Vec<Arc<str>>>,
}

impl PartitionSpec {
    /// A spec from its entries (an empty entry is `None`).
    pub fn new(entries: Vec<Vec<Arc<str>>>) -> PartitionSpec {
        PartitionSpec { entries }
    }

    /// The replicated spec `P()`.
    pub fn replicated() -> PartitionSpec {
        PartitionSpec::default()
    }

    /// The entries.
    pub fn entries(&self) -> &[Vec<Arc<str>>] {
        &self.entries
    }

    /// The axes of dimension `d` (none past the entries).
    pub fn axes_of(&self, d: usize) -> &[Arc<str>] {
        self.entries.get(d).map(|e| e.as_slice()).unwrap_or(&[])
    }

    /// Every axis the spec names, in order.
    pub fn all_axes(&self) -> impl Iterator<Item = &Arc<str>> {
        self.entries.iter().flatten()
    }

    /// Checks the spec against a mesh and an array rank: known axes, each used once, no
    /// axis on a dimension past the rank (trailing `None` entries are fine, as in JAX).
    pub fn check(&self, mesh: &Mesh, rank: usize) -> Result<(), ShardingError> {
        let mut seen: Vec<&str> = Vec::new();
        for n in self.all_axes() {
            if mesh.axis_index(n).is_none() {
                return Err(ShardingError::UnknownAxis(n.to_string()));
            }
            if seen.contains(&&**n) {
                return Err(ShardingError::AxisUsedTwice(n.to_string()));
            }
            seen.push(n);
        }
        if let Some(last) = self.entries.iter().rposition(|e| !e.is_empty()) {
            if last >= rank {
                return Err(ShardingError::TooManyEntries {
                    entries: self.entries.len(),
                    rank,
                });
            }
        }
        Ok(())
    }

    /// The number of pieces dimension `d` is split into.
    pub fn tiles(&self, mesh: &Mesh, d: usize) -> i64 {
        self.axes_of(d)
            .iter()
            .map(|n| mesh.axis_size(n).unwrap_or(1))
            .product()
    }

    /// The mesh axes the spec does not use, in mesh order.
    pub fn unused_axes(&self, mesh: &Mesh) -> Vec<usize> {
        (0..mesh.axes().len())
            .filter(|&i| !self.all_axes().any(|n| **n == *mesh.axes()[i].0))
            .collect()
    }
}

impl fmt::Display for PartitionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("P(")?;
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match e.as_slice() {
                [] => f.write_str("None")?,
                [n] => f.write_str(&quote(n))?,
                names => {
                    f.write_str("(")?;
                    for (k, n) in names.iter().enumerate() {
                        if k > 0 {
                            f.write_str(", ")?;
                        }
                        f.write_str(&quote(n))?;
                    }
                    f.write_str(")")?;
                }
            }
        }
        if self.entries.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

/// How an array of rank `rank` laid out by `spec` on `mesh` is cut: the number of tiles
/// per dimension, the partition (device position in the mesh, row-major) holding each
/// piece in row-major order over `[tiles..., copies]`, and the number of copies of each
/// tile (the product of the sizes of the axes the spec does not use).
///
/// # Examples
/// ```
/// use ferrax_ir::{tiling, Mesh, PartitionSpec};
/// let mesh = Mesh::new([("x", 2), ("y", 2)])?;
/// // A matrix split over `x` by rows; `y` holds copies.
/// let t = tiling(&mesh, &PartitionSpec::new(vec![vec!["x".into()]]), 2)?;
/// assert_eq!((t.tiles, t.copies), (vec![2, 1], 2));
/// // Row tile 0 is on devices 0 and 1 (x=0), row tile 1 on devices 2 and 3 (x=1).
/// assert_eq!(t.partitions, [0, 1, 2, 3]);
/// # Ok::<(), ferrax_ir::ShardingError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiling {
    /// Tiles per dimension.
    pub tiles: Vec<i64>,
    /// The partition of each piece, row-major over `[tiles..., copies]`.
    pub partitions: Vec<i64>,
    /// Copies of each tile.
    pub copies: i64,
}

/// The [`Tiling`] of an array of rank `rank` laid out by `spec` on `mesh` (errors as
/// [`PartitionSpec::check`]).
pub fn tiling(mesh: &Mesh, spec: &PartitionSpec, rank: usize) -> Result<Tiling, ShardingError> {
    spec.check(mesh, rank)?;
    let tiles: Vec<i64> = (0..rank).map(|d| spec.tiles(mesh, d)).collect();
    let unused = spec.unused_axes(mesh);
    let copies: i64 = unused.iter().map(|&i| mesh.axes()[i].1).product();
    let mut order: Vec<usize> = Vec::with_capacity(mesh.axes().len());
    for d in 0..rank {
        for n in spec.axes_of(d) {
            if let Some(i) = mesh.axis_index(n) {
                order.push(i);
            }
        }
    }
    order.extend(&unused);
    Ok(Tiling {
        tiles,
        partitions: mesh.enumerate(&order),
        copies,
    })
}

/// The GSPMD sharding text (`HloSharding`) of an array of rank `rank` laid out by `spec`
/// on `mesh`: `{replicated}` when no dimension is split, else
/// `{devices=[t0,...,t(r-1)(,k)]LIST( last_tile_dim_replicate)}` with the tile counts per
/// dimension, `k` the number of copies (the product of the unused axes' sizes, when more
/// than 1) and the explicit list of device ids (partition ids) of the tiles in row-major
/// order.
///
/// # Examples
/// ```
/// use ferrax_ir::{hlo_sharding, Mesh, PartitionSpec};
/// let mesh = Mesh::new([("x", 2), ("y", 2)])?;
/// let rows = PartitionSpec::new(vec![vec!["x".into()]]);
/// assert_eq!(
///     hlo_sharding(&mesh, &rows, 2)?,
///     "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
/// );
/// assert_eq!(hlo_sharding(&mesh, &PartitionSpec::replicated(), 2)?, "{replicated}");
/// # Ok::<(), ferrax_ir::ShardingError>(())
/// ```
pub fn hlo_sharding(
    mesh: &Mesh,
    spec: &PartitionSpec,
    rank: usize,
) -> Result<String, ShardingError> {
    let Tiling {
        tiles,
        partitions: devices,
        copies,
    } = tiling(mesh, spec, rank)?;
    if tiles.iter().product::<i64>() == 1 {
        return Ok("{replicated}".to_owned());
    }
    let mut s = String::from("{devices=[");
    let mut dims: Vec<String> = tiles.iter().map(|t| t.to_string()).collect();
    if copies > 1 {
        dims.push(copies.to_string());
    }
    s.push_str(&dims.join(","));
    s.push(']');
    let list: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    s.push_str(&list.join(","));
    if copies > 1 {
        s.push_str(" last_tile_dim_replicate");
    }
    s.push('}');
    Ok(s)
}

/// The Shardy dimension shardings of an array of rank `rank` laid out by `spec` (on a
/// mesh it is checked against): one closed entry per dimension, `[{"x"}, {}]`, an entry
/// of several axes as `{"x", "y"}` (major to minor), as JAX writes them in
/// `#sdy.sharding<@mesh, [...]>`.
///
/// # Examples
/// ```
/// use ferrax_ir::{sdy_sharding, Mesh, PartitionSpec};
/// let mesh = Mesh::new([("x", 2), ("y", 2)])?;
/// let spec = PartitionSpec::new(vec![vec![], vec!["x".into(), "y".into()]]);
/// assert_eq!(sdy_sharding(&mesh, &spec, 2)?, r#"[{}, {"x", "y"}]"#);
/// # Ok::<(), ferrax_ir::ShardingError>(())
/// ```
pub fn sdy_sharding(
    mesh: &Mesh,
    spec: &PartitionSpec,
    rank: usize,
) -> Result<String, ShardingError> {
    spec.check(mesh, rank)?;
    let mut s = String::from("[");
    for d in 0..rank {
        if d > 0 {
            s.push_str(", ");
        }
        s.push('{');
        for (k, n) in spec.axes_of(d).iter().enumerate() {
            if k > 0 {
                s.push_str(", ");
            }
            s.push_str(&mlir_string(n));
        }
        s.push('}');
    }
    s.push(']');
    Ok(s)
}

/// A string as an MLIR string literal: in double quotes, `"` and `\` escaped, other
/// non-printable bytes as `\XX`.
pub fn mlir_string(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('"');
    for b in name.bytes() {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:02X}")),
        }
    }
    s.push('"');
    s
}

/// The Shardy mesh text: `<["x"=2, "y"=2]>`.
pub fn sdy_mesh(mesh: &Mesh) -> String {
    let axes: Vec<String> = mesh
        .axes()
        .iter()
        .map(|(n, sz)| format!("{}={sz}", mlir_string(n)))
        .collect();
    format!("<[{}]>", axes.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entries: &[&[&str]]) -> PartitionSpec {
        PartitionSpec::new(
            entries
                .iter()
                .map(|e| e.iter().map(|n| Arc::from(*n)).collect())
                .collect(),
        )
    }

    #[test]
    fn shardings_on_a_2x2_mesh() {
        let m = Mesh::new([("x", 2), ("y", 2)]).unwrap();
        let cases: &[(&[&[&str]], usize, &str)] = &[
            (&[], 2, "{replicated}"),
            (
                &[&["x"]],
                2,
                "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
            ),
            (
                &[&[], &["y"]],
                2,
                "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}",
            ),
            (&[&["y"], &["x"]], 2, "{devices=[2,2]0,2,1,3}"),
            (&[&["x"], &["y"]], 3, "{devices=[2,2,1]0,1,2,3}"),
            (&[&["x", "y"]], 2, "{devices=[4,1]0,1,2,3}"),
            (&[&["y", "x"], &[]], 2, "{devices=[4,1]0,2,1,3}"),
            (
                &[&["y"]],
                3,
                "{devices=[2,1,1,2]0,2,1,3 last_tile_dim_replicate}",
            ),
            (&[&["x", "y"], &[], &[]], 2, "{devices=[4,1]0,1,2,3}"),
        ];
        for (entries, rank, want) in cases {
            assert_eq!(
                hlo_sharding(&m, &spec(entries), *rank).unwrap(),
                *want,
                "{entries:?}"
            );
        }
    }

    #[test]
    fn size_one_axes_and_errors() {
        let m = Mesh::new([("a", 1), ("b", 4), ("c", 1)]).unwrap();
        assert_eq!(
            hlo_sharding(&m, &spec(&[&["b"]]), 1).unwrap(),
            "{devices=[4]0,1,2,3}"
        );
        assert_eq!(
            hlo_sharding(&m, &spec(&[&["a"]]), 1).unwrap(),
            "{replicated}"
        );
        let err = |e: &[&[&str]], r| hlo_sharding(&m, &spec(e), r).unwrap_err();
        assert_eq!(err(&[&["z"]], 1), ShardingError::UnknownAxis("z".into()));
        assert_eq!(
            err(&[&["b"], &["b"]], 2),
            ShardingError::AxisUsedTwice("b".into())
        );
        assert!(matches!(
            err(&[&[], &["b"]], 1),
            ShardingError::TooManyEntries { .. }
        ));
        assert!(Mesh::new([("a", 1), ("a", 2)]).is_err());
        assert!(Mesh::new([("a", 0)]).is_err());
    }

    #[test]
    fn sdy_shardings() {
        let m = Mesh::new([("x", 2), ("y", 2)]).unwrap();
        assert_eq!(
            sdy_sharding(&m, &spec(&[&["x"]]), 2).unwrap(),
            r#"[{"x"}, {}]"#
        );
        assert_eq!(sdy_sharding(&m, &spec(&[]), 1).unwrap(), r#"[{}]"#);
        assert_eq!(sdy_sharding(&m, &spec(&[]), 0).unwrap(), "[]");
        assert_eq!(
            sdy_sharding(&m, &spec(&[&[], &["y", "x"]]), 3).unwrap(),
            r#"[{}, {"y", "x"}, {}]"#
        );
        assert!(sdy_sharding(&m, &spec(&[&["z"]]), 1).is_err());
        assert_eq!(sdy_mesh(&m), r#"<["x"=2, "y"=2]>"#);
        assert_eq!(mlir_string("a\"b"), r#""a\"b""#);
    }

    #[test]
    fn groups_and_printing() {
        let m = Mesh::new([("x", 2), ("y", 2)]).unwrap();
        let g = |ns: &[&str]| {
            m.groups(&ns.iter().map(|n| Arc::from(*n)).collect::<Vec<_>>())
                .unwrap()
        };
        assert_eq!(g(&["x"]), vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(g(&["y"]), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(g(&["x", "y"]), vec![vec![0, 1, 2, 3]]);
        assert_eq!(g(&["y", "x"]), vec![vec![0, 2, 1, 3]]);
        assert_eq!(
            m.to_string(),
            "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))"
        );
        assert_eq!(spec(&[&["x"]]).to_string(), "P('x',)");
        assert_eq!(spec(&[&[], &["x", "y"]]).to_string(), "P(None, ('x', 'y'))");
        assert_eq!(spec(&[]).to_string(), "P()");
    }
}

/// The named axes in scope where an equation is checked: those of every enclosing
/// `shard_map`'s mesh, with their sizes (an inner binding of a name shadows an outer one).
///
/// An *open* environment (the default of [`crate::JaxprBuilder`] and of passes that rebuild
/// sub-jaxprs without knowing where they sit) lets collectives name axes it does not
/// bind: rules that need such an axis's size report
/// [`crate::RuleError::AxisSizeUnknown`], and the checker then trusts the declared output
/// types. A *closed* one (the full [`crate::typecheck()`], Python's tracing inside a
/// `shard_map` body) reports an unbound name as [`crate::RuleError::UnboundAxis`].
///
/// # Examples
/// ```
/// use ferrax_ir::{typecheck, typecheck_in, AbstractValue, AxisEnv, Builtin, DType};
/// use ferrax_ir::{JaxprBuilder, Mesh, Param, Params};
/// let env = AxisEnv::closed().with_mesh(&Mesh::new([("x", 4)])?);
/// assert_eq!(env.size("x"), Ok(Some(4)));
/// assert_eq!(env.size("y"), Err("y".to_owned()));
/// assert_eq!(AxisEnv::open().size("y"), Ok(None));
/// // A `shard_map` body built on its own, where the mesh's axes are bound:
/// let mut b = JaxprBuilder::with_axis_env(env.clone());
/// let a = b.add_invar(AbstractValue::array(DType::F32, &[2])?);
/// let axes = Params::new([("axes", Param::names(&["x"]))]);
/// let s = b.apply(Builtin::Psum, [a], axes)?;
/// let body = b.build(vec![s.into()])?;
/// assert_eq!(body.to_string(), "{ lambda ; a:f32[2]. let b:f32[2] = psum[axes=('x',)] a in (b,) }");
/// typecheck_in(&body, &env)?;
/// // At the top level no axis is in scope: `x` is unbound.
/// assert!(typecheck(&body).unwrap_err().to_string().contains("'x'"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisEnv {
    axes: Vec<(Arc<str>, i64)>,
    open: bool,
}

impl Default for AxisEnv {
    /// Open, with no axes.
    fn default() -> AxisEnv {
        AxisEnv::open()
    }
}

impl AxisEnv {
    /// No axes; unbound names are errors.
    pub fn closed() -> AxisEnv {
        AxisEnv {
            axes: Vec::new(),
            open: false,
        }
    }

    /// No axes; unbound names are tolerated.
    pub fn open() -> AxisEnv {
        AxisEnv {
            axes: Vec::new(),
            open: true,
        }
    }

    /// A closed environment binding these axes.
    pub fn of<N: AsRef<str>>(axes: impl IntoIterator<Item = (N, i64)>) -> AxisEnv {
        AxisEnv {
            axes: axes
                .into_iter()
                .map(|(n, s)| (Arc::from(n.as_ref()), s))
                .collect(),
            open: false,
        }
    }

    /// True when unbound names are tolerated.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The bound axes, outermost first.
    pub fn axes(&self) -> &[(Arc<str>, i64)] {
        &self.axes
    }

    /// This environment with a mesh's axes bound too (a `shard_map` body's).
    pub fn with_mesh(&self, mesh: &Mesh) -> AxisEnv {
        let mut axes = self.axes.clone();
        axes.extend(mesh.axes().iter().cloned());
        AxisEnv {
            axes,
            open: self.open,
        }
    }

    /// The size of an axis: `Ok(Some)` if bound, `Ok(None)` if not bound in an open
    /// environment, `Err(name)` if not bound in a closed one.
    pub fn size(&self, name: &str) -> Result<Option<i64>, String> {
        match self.axes.iter().rev().find(|(n, _)| &**n == name) {
            Some((_, s)) => Ok(Some(*s)),
            None if self.open => Ok(None),
            None => Err(name.to_owned()),
        }
    }
}
