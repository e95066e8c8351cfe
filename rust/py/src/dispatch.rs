//! jit's hit path: a call of a jitted function whose signature ran before, done here
//! without running any of ferrax's Python code.
//!
//! [`Dispatcher`] is the base class of `ferrax._jit.Jitted`; its `__call__` flattens the
//! arguments (tuples, lists, dicts and `None` as nodes, uncommitted `DeviceArray`s as
//! leaves), matches the flattened signature against the ones registered, runs the
//! executable with jaxlib (`execute_sharded`, then `consume_with_handlers`: the same calls
//! the Python path makes) and wraps the results as `DeviceArray`s in the output's
//! structure. Anything else is a miss, and a miss changes nothing: the call goes to
//! `Jitted._call`, the Python path, which registers the signature here (`_register`)
//! after a run on the default device that this path can repeat exactly.
//!
//! A signature is what the Python path's cache key holds, read more strictly: the node
//! kinds and sizes, the dicts' keys (the same objects, or equal `str`s), the leaves'
//! abstract values (compared as values, the same object first), and the x64 mode. No
//! Python code runs between reading the arguments and jaxlib's calls: the slots of a
//! `DeviceArray` are read and written through their member descriptors' C slots.

use crate::avals::ShapedArray;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyList, PyModule, PyString, PyTuple, PyType};
use pyo3::{ffi, intern};
use pyo3::{PyTraverseError, PyVisit};
use smallvec::SmallVec;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// Signatures kept per jitted function; the oldest is dropped past this.
const MAX_ENTRIES: usize = 64;
/// Nodes, dict keys and leaves a flattening holds inline before it allocates.
const FLAT_CAPACITY: usize = 16;
/// Deeper argument or output nests go to the Python path.
const MAX_DEPTH: usize = 32;

extern "C" {
    // Exported by CPython 3.11 (the oldest this module loads in) and in the stable ABI
    // from 3.12; pyo3's limited-API bindings declare it from 3.12 only. It saves the
    // argument tuple of each of jaxlib's two calls.
    fn PyObject_Vectorcall(
        callable: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargsf: usize,
        kwnames: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
}

/// `callable(*args)` by the vectorcall protocol, with a free slot before the arguments
/// (`PY_VECTORCALL_ARGUMENTS_OFFSET`: a bound method puts its `self` there instead of
/// copying the arguments).
fn vectorcall<'py>(
    callable: &Bound<'py, PyAny>,
    args: &[&Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let mut ptrs: [*mut ffi::PyObject; 3] = match args {
        [a] => [std::ptr::null_mut(), a.as_ptr(), std::ptr::null_mut()],
        [a, b] => [std::ptr::null_mut(), a.as_ptr(), b.as_ptr()],
        _ => {
            return Err(PyRuntimeError::new_err(
                "vectorcall takes one or two arguments here",
            ))
        }
    };
    const ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);
    // SAFETY: `args.len()` valid object pointers after a writable slot, borrowed for the
    // call; returns a new reference or null with an exception set.
    unsafe {
        let out = PyObject_Vectorcall(
            callable.as_ptr(),
            ptrs.as_mut_ptr().add(1),
            args.len() | ARGUMENTS_OFFSET,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(callable.py(), out)
    }
}

/// A `__slots__` member of `DeviceArray`, read and written through its descriptor's
/// `tp_descr_get`/`tp_descr_set` (what `x._buffer` and `x._buffer = b` call, without the
/// attribute lookup).
struct Slot {
    descr: Py<PyAny>,
    get: ffi::descrgetfunc,
    set: ffi::descrsetfunc,
}

impl Slot {
    fn of(ty: &Bound<'_, PyType>, name: &str) -> PyResult<Slot> {
        let descr = ty.getattr(name)?;
        let descr_type = descr.get_type();
        if descr_type.name()?.to_str()? != "member_descriptor" {
            return Err(PyTypeError::new_err(format!(
                "{name} of the dispatched array type is not a __slots__ member"
            )));
        }
        // SAFETY: a type object's slots; member_descriptor has both (null checked).
        let (get, set) = unsafe {
            let t = descr_type.as_type_ptr();
            (
                ffi::PyType_GetSlot(t, ffi::Py_tp_descr_get),
                ffi::PyType_GetSlot(t, ffi::Py_tp_descr_set),
            )
        };
        if get.is_null() || set.is_null() {
            return Err(PyTypeError::new_err(format!(
                "the descriptor of {name} cannot be read or written"
            )));
        }
        // SAFETY: the slots hold functions of these signatures.
        let (get, set) = unsafe {
            (
                std::mem::transmute::<*mut c_void, ffi::descrgetfunc>(get),
                std::mem::transmute::<*mut c_void, ffi::descrsetfunc>(set),
            )
        };
        Ok(Slot {
            descr: descr.unbind(),
            get,
            set,
        })
    }

    /// The member of `obj` (an instance of the type the slot was read from; the
    /// descriptor checks it too). An unset member is an `AttributeError`.
    fn read<'py>(&self, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        // SAFETY: valid object pointers; the call returns a new reference or null with
        // an exception set.
        unsafe {
            let ty = ffi::Py_TYPE(obj.as_ptr()).cast::<ffi::PyObject>();
            Bound::from_owned_ptr_or_err(py, (self.get)(self.descr.as_ptr(), obj.as_ptr(), ty))
        }
    }

    fn write(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        // SAFETY: valid object pointers; the setter takes its own reference to `value`.
        let status = unsafe { (self.set)(self.descr.as_ptr(), obj.as_ptr(), value.as_ptr()) };
        if status < 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(())
    }
}

/// What the hit path needs of ferrax: the array type and its slots, the x64 flag's
/// module and the trace state. Set once, when `ferrax._jit` is imported.
struct Runtime {
    device_array: Py<PyType>,
    new: ffi::newfunc,
    no_args: Py<PyTuple>,
    buffer: Slot,
    aval: Slot,
    host: Slot,
    sharding: Slot,
    /// The namespace of `ferrax._config` (its `_x64`).
    config: Py<PyDict>,
    /// `ferrax._core`'s thread-local trace state (its `dynamic` stack).
    trace_state: Py<PyAny>,
}

static RUNTIME: PyOnceLock<Runtime> = PyOnceLock::new();

impl Runtime {
    fn is_device_array(&self, obj: &Bound<'_, PyAny>) -> bool {
        // SAFETY: reading an object's type pointer.
        unsafe {
            ffi::Py_TYPE(obj.as_ptr()) == self.device_array.as_ptr().cast::<ffi::PyTypeObject>()
        }
    }

    /// `DeviceArray(buffer, aval)`: what its `__init__` does, without running it.
    fn device_array<'py>(
        &self,
        buffer: &Bound<'py, PyAny>,
        aval: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = buffer.py();
        // SAFETY: the type's own tp_new (object's), with no arguments; returns a new
        // reference or null with an exception set.
        let obj = unsafe {
            let raw = (self.new)(
                self.device_array.as_ptr().cast::<ffi::PyTypeObject>(),
                self.no_args.as_ptr(),
                std::ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, raw)?
        };
        let none = py.None().into_bound(py);
        self.buffer.write(&obj, buffer)?;
        self.aval.write(&obj, aval)?;
        self.host.write(&obj, &none)?;
        self.sharding.write(&obj, &none)?;
        Ok(obj)
    }

    /// Whether a staging trace (`make_jaxpr`, an outer `jit`) is active in this thread:
    /// whether the thread's `dynamic` list is non-empty. The list is read once per thread
    /// (an attribute of a `threading.local`, about 50 ns a read) and kept: `ferrax._core`
    /// makes it once per thread and only appends to and pops from it.
    fn staging(&self, py: Python<'_>) -> PyResult<bool> {
        thread_local! {
            static DYNAMIC: std::cell::RefCell<Option<Py<PyList>>> =
                const { std::cell::RefCell::new(None) };
        }
        DYNAMIC.with(|cell| {
            if let Some(list) = cell.borrow().as_ref() {
                return Ok(!list.bind(py).is_empty());
            }
            let state = self.trace_state.bind(py);
            let list = state
                .getattr(intern!(py, "dynamic"))?
                .cast_into_exact::<PyList>()
                .map_err(|_| PyTypeError::new_err("the trace state's `dynamic` is not a list"))?;
            let staging = !list.is_empty();
            *cell.borrow_mut() = Some(list.unbind());
            Ok(staging)
        })
    }

    fn x64(&self, py: Python<'_>) -> PyResult<bool> {
        match self.config.bind(py).get_item(intern!(py, "_x64"))? {
            Some(flag) => flag.is_truthy(),
            None => Err(PyRuntimeError::new_err("ferrax._config has no _x64")),
        }
    }
}

/// Tells the hit path what ferrax's arrays and modules are (`ferrax._jit` calls it once).
#[pyfunction]
#[pyo3(signature = (*, device_array, config, trace_state))]
pub fn set_dispatch_runtime(
    py: Python<'_>,
    device_array: &Bound<'_, PyType>,
    config: &Bound<'_, PyModule>,
    trace_state: &Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: reading a heap type's tp_new slot.
    let new = unsafe { ffi::PyType_GetSlot(device_array.as_type_ptr(), ffi::Py_tp_new) };
    if new.is_null() {
        return Err(PyTypeError::new_err(
            "the dispatched array type cannot be instantiated",
        ));
    }
    let runtime = Runtime {
        device_array: device_array.clone().unbind(),
        // SAFETY: the slot holds a function of this signature.
        new: unsafe { std::mem::transmute::<*mut c_void, ffi::newfunc>(new) },
        no_args: PyTuple::empty(py).unbind(),
        buffer: Slot::of(device_array, "_buffer")?,
        aval: Slot::of(device_array, "_aval")?,
        host: Slot::of(device_array, "_host")?,
        sharding: Slot::of(device_array, "_sharding")?,
        config: config.dict().unbind(),
        trace_state: trace_state.clone().unbind(),
    };
    // Set once: a second call (a reloaded module) keeps the first runtime, whose arrays
    // are then the only ones that hit.
    let _ = RUNTIME.set(py, runtime);
    Ok(())
}

/// A node of a flattened call, in depth-first order; a dict's keys are kept apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Node {
    Tuple(usize),
    List(usize),
    Dict(usize),
    None,
    Leaf,
}

struct Leaf<'py> {
    object: Bound<'py, PyAny>,
    buffer: Bound<'py, PyAny>,
    aval: Bound<'py, PyAny>,
}

/// A call's arguments flattened as `(args, kwargs)`, dicts in their own order (a
/// signature keeps the permutation to the sorted order the Python path uses).
/// Inline up to `FLAT_CAPACITY` of each: a common call flattens without allocating.
struct Flat<'py> {
    nodes: SmallVec<[Node; FLAT_CAPACITY]>,
    keys: SmallVec<[Bound<'py, PyAny>; FLAT_CAPACITY]>,
    leaves: SmallVec<[Leaf<'py>; FLAT_CAPACITY]>,
}

impl<'py> Flat<'py> {
    /// None when some node or leaf is not one the hit path takes.
    fn of(
        rt: &Runtime,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> Option<Flat<'py>> {
        let mut flat = Flat {
            nodes: SmallVec::new(),
            keys: SmallVec::new(),
            leaves: SmallVec::new(),
        };
        flat.nodes.push(Node::Tuple(args.len()));
        for a in args.iter() {
            flat.visit(rt, &a, 1)?;
        }
        match kwargs {
            Some(kw) => flat.visit_dict(rt, kw, 1)?,
            None => flat.nodes.push(Node::Dict(0)),
        }
        Some(flat)
    }

    fn visit(&mut self, rt: &Runtime, x: &Bound<'py, PyAny>, depth: usize) -> Option<()> {
        if rt.is_device_array(x) {
            if !rt.sharding.read(x).ok()?.is_none() {
                return None; // committed: placed by the Python path
            }
            self.nodes.push(Node::Leaf);
            self.leaves.push(Leaf {
                object: x.clone(),
                buffer: rt.buffer.read(x).ok()?,
                aval: rt.aval.read(x).ok()?,
            });
            return Some(());
        }
        if x.is_none() {
            self.nodes.push(Node::None);
            return Some(());
        }
        if depth >= MAX_DEPTH {
            return None;
        }
        if let Ok(t) = x.cast_exact::<PyTuple>() {
            self.nodes.push(Node::Tuple(t.len()));
            for item in t.iter() {
                self.visit(rt, &item, depth + 1)?;
            }
            return Some(());
        }
        if let Ok(l) = x.cast_exact::<PyList>() {
            self.nodes.push(Node::List(l.len()));
            for item in l.iter() {
                self.visit(rt, &item, depth + 1)?;
            }
            return Some(());
        }
        if let Ok(d) = x.cast_exact::<PyDict>() {
            return self.visit_dict(rt, d, depth + 1);
        }
        None
    }

    fn visit_dict(&mut self, rt: &Runtime, d: &Bound<'py, PyDict>, depth: usize) -> Option<()> {
        self.nodes.push(Node::Dict(d.len()));
        for (k, v) in d.iter() {
            self.keys.push(k);
            self.visit(rt, &v, depth)?;
        }
        Some(())
    }
}

/// Whether two dict keys are the same for a signature: the same object, or equal
/// `str`s (compared without running Python code).
fn same_key(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> bool {
    if a.is(b) {
        return true;
    }
    a.is_exact_instance_of::<PyString>()
        && b.is_exact_instance_of::<PyString>()
        // SAFETY: two str objects.
        && unsafe { ffi::PyUnicode_Compare(a.as_ptr(), b.as_ptr()) == 0 }
}

fn same_aval(known: &Bound<'_, ShapedArray>, given: &Bound<'_, PyAny>) -> bool {
    known.is(given)
        || given
            .cast::<ShapedArray>()
            .is_ok_and(|g| g.get().aval == known.get().aval)
}

/// The structure of a call's outputs: leaves are indices into the executable's
/// results; `Python` is the Python path's unflattening (nodes the hit path does not
/// build itself: named tuples, registered classes, ...).
enum Out {
    Leaf(usize),
    Tuple(Vec<Out>),
    List(Vec<Out>),
    Dict(Vec<(Py<PyAny>, Out)>),
    None,
    Python(Py<PyAny>),
}

impl Out {
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self {
            Out::Leaf(_) | Out::None => Ok(()),
            Out::Tuple(items) | Out::List(items) => {
                items.iter().try_for_each(|o| o.traverse(visit))
            }
            Out::Dict(items) => items.iter().try_for_each(|(k, o)| {
                visit.call(k)?;
                o.traverse(visit)
            }),
            Out::Python(unflatten) => visit.call(unflatten),
        }
    }

    /// Reads the output template (the output tree with the leaves' indices as its
    /// leaves); None when it has other nodes, or does not use each index once.
    fn parse(template: &Bound<'_, PyAny>, n: usize) -> Option<Out> {
        let mut seen = vec![false; n];
        let out = Out::parse_node(template, &mut seen, 0)?;
        seen.iter().all(|&s| s).then_some(out)
    }

    fn parse_node(x: &Bound<'_, PyAny>, seen: &mut [bool], depth: usize) -> Option<Out> {
        if depth > MAX_DEPTH {
            return None;
        }
        if x.is_none() {
            return Some(Out::None);
        }
        if x.is_exact_instance_of::<PyInt>() {
            let i: usize = x.extract().ok()?;
            let slot = seen.get_mut(i)?;
            if *slot {
                return None;
            }
            *slot = true;
            return Some(Out::Leaf(i));
        }
        if let Ok(t) = x.cast_exact::<PyTuple>() {
            let items = t.iter().map(|c| Out::parse_node(&c, seen, depth + 1));
            return Some(Out::Tuple(items.collect::<Option<_>>()?));
        }
        if let Ok(l) = x.cast_exact::<PyList>() {
            let items = l.iter().map(|c| Out::parse_node(&c, seen, depth + 1));
            return Some(Out::List(items.collect::<Option<_>>()?));
        }
        if let Ok(d) = x.cast_exact::<PyDict>() {
            let items = d
                .iter()
                .map(|(k, v)| Some((k.unbind(), Out::parse_node(&v, seen, depth + 1)?)));
            return Some(Out::Dict(items.collect::<Option<_>>()?));
        }
        None
    }

    fn build<'py>(
        &self,
        py: Python<'py>,
        arrays: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Out::Leaf(i) => arrays.get(*i).cloned().ok_or_else(|| {
                PyRuntimeError::new_err("jit: the executable returned too few results")
            }),
            Out::Tuple(items) => {
                let built = items
                    .iter()
                    .map(|o| o.build(py, arrays))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(PyTuple::new(py, built)?.into_any())
            }
            Out::List(items) => {
                let built = items
                    .iter()
                    .map(|o| o.build(py, arrays))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(PyList::new(py, built)?.into_any())
            }
            Out::Dict(items) => {
                let d = PyDict::new(py);
                for (k, o) in items {
                    d.set_item(k.bind(py), o.build(py, arrays)?)?;
                }
                Ok(d.into_any())
            }
            Out::None => Ok(py.None().into_bound(py)),
            Out::Python(unflatten) => unflatten.bind(py).call1((PyList::new(py, arrays)?,)),
        }
    }
}

/// The steps of a hit, in order. `_hit_until` stops after one, so that a profile can
/// time each (bench/dispatch_profile.py); a call runs them all.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    /// Entering the call and leaving it.
    Enter,
    /// Reading the trace state and the x64 flag.
    State,
    /// Flattening the arguments.
    Flatten,
    /// Finding the signature.
    Match,
    /// The argument list and `execute_sharded`.
    Execute,
    /// `consume_with_handlers`.
    Consume,
    /// The `DeviceArray`s and the output's structure.
    Wrap,
}

impl Step {
    const ALL: [Step; 7] = [
        Step::Enter,
        Step::State,
        Step::Flatten,
        Step::Match,
        Step::Execute,
        Step::Consume,
        Step::Wrap,
    ];
}

/// A registered signature and how to run it.
struct Entry {
    x64: bool,
    nodes: Vec<Node>,
    keys: Vec<Py<PyAny>>,
    avals: Vec<Py<ShapedArray>>,
    /// The leaves in the Python path's order, as indices into this path's order
    /// (None: the same order).
    order: Option<Vec<usize>>,
    /// The executable's leading arguments: the traced function's constants.
    consts: Vec<Py<PyAny>>,
    /// jaxlib's bound `LoadedExecutable.execute_sharded`.
    execute: Py<PyAny>,
    /// jaxlib's `ExecuteResults.consume_with_handlers`, and the result handlers.
    consume: Py<PyAny>,
    handlers: Py<PyAny>,
    out_avals: Vec<Py<PyAny>>,
    out: Out,
}

impl Entry {
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        for k in &self.keys {
            visit.call(k)?;
        }
        for a in &self.avals {
            visit.call(a)?;
        }
        for c in self.consts.iter().chain(&self.out_avals) {
            visit.call(c)?;
        }
        visit.call(&self.execute)?;
        visit.call(&self.consume)?;
        visit.call(&self.handlers)?;
        self.out.traverse(visit)
    }

    fn matches(&self, py: Python<'_>, x64: bool, flat: &Flat<'_>) -> bool {
        self.x64 == x64
            && self.nodes[..] == flat.nodes[..]
            && self.keys.len() == flat.keys.len()
            && self.avals.len() == flat.leaves.len()
            && self
                .keys
                .iter()
                .zip(&flat.keys)
                .all(|(k, g)| same_key(k.bind(py), g))
            && self
                .avals
                .iter()
                .zip(&flat.leaves)
                .all(|(a, leaf)| same_aval(a.bind(py), &leaf.aval))
    }

    /// The executable's arguments: the constants, then the leaves in the Python path's
    /// order.
    fn buffers<'a, 'py>(
        &'a self,
        py: Python<'py>,
        flat: &'a Flat<'py>,
    ) -> PyResult<Vec<&'a Bound<'py, PyAny>>> {
        let mut buffers = Vec::with_capacity(self.consts.len() + flat.leaves.len());
        buffers.extend(self.consts.iter().map(|c| c.bind(py)));
        match &self.order {
            None => buffers.extend(flat.leaves.iter().map(|l| &l.buffer)),
            Some(order) => {
                for &i in order {
                    let leaf = flat.leaves.get(i).ok_or_else(|| {
                        PyRuntimeError::new_err("jit: a signature's leaf order is out of range")
                    })?;
                    buffers.push(&leaf.buffer);
                }
            }
        }
        Ok(buffers)
    }

    fn run<'py>(
        &self,
        py: Python<'py>,
        rt: &Runtime,
        flat: &Flat<'py>,
        until: Step,
    ) -> PyResult<Bound<'py, PyAny>> {
        let buffers = match &self.order {
            // The common case, straight into the list.
            None if self.consts.is_empty() => {
                PyList::new(py, flat.leaves.iter().map(|l| &l.buffer))?
            }
            _ => PyList::new(py, self.buffers(py, flat)?)?,
        }
        .into_any();
        let results = vectorcall(self.execute.bind(py), &[&buffers])?;
        if until == Step::Execute {
            return Ok(py.None().into_bound(py));
        }
        let outs = vectorcall(self.consume.bind(py), &[&results, self.handlers.bind(py)])?;
        if until == Step::Consume {
            return Ok(py.None().into_bound(py));
        }
        let outs = outs.cast_into::<PyList>()?;
        if let (Out::Leaf(0), [aval], 1) = (&self.out, self.out_avals.as_slice(), outs.len()) {
            return rt.device_array(&outs.get_item(0)?, aval.bind(py));
        }
        if outs.len() != self.out_avals.len() {
            return Err(PyRuntimeError::new_err(format!(
                "jit: the executable returned {} results, expected {}",
                outs.len(),
                self.out_avals.len()
            )));
        }
        let arrays = outs
            .iter()
            .zip(&self.out_avals)
            .map(|(b, a)| rt.device_array(&b, a.bind(py)))
            .collect::<PyResult<Vec<_>>>()?;
        self.out.build(py, &arrays)
    }
}

/// The leaves of `x` (a node or leaf of a flattenable call) in the Python path's order
/// (dicts by sorted key), as indices into the depth-first order in which dicts go by
/// insertion; `start` is the index of `x`'s first leaf. Returns its number of leaves.
fn canonical_order(
    rt: &Runtime,
    x: &Bound<'_, PyAny>,
    start: usize,
    order: &mut Vec<usize>,
) -> PyResult<usize> {
    let py = x.py();
    if rt.is_device_array(x) {
        order.push(start);
        return Ok(1);
    }
    if x.is_none() {
        return Ok(0);
    }
    let children: Vec<Bound<'_, PyAny>> = if let Ok(t) = x.cast_exact::<PyTuple>() {
        t.iter().collect()
    } else if let Ok(l) = x.cast_exact::<PyList>() {
        l.iter().collect()
    } else if let Ok(d) = x.cast_exact::<PyDict>() {
        // Each child's first leaf in insertion order, then the children by sorted key
        // (`sorted(d)`, as `tree_util` sorts them).
        let mut firsts = Vec::with_capacity(d.len());
        let mut n = 0;
        for (k, v) in d.iter() {
            firsts.push((k, v.clone(), start + n));
            n += canonical_order(rt, &v, 0, &mut Vec::new())?;
        }
        let sorted = py.import("builtins")?.getattr("sorted")?.call1((d,))?;
        for k in sorted.try_iter()? {
            let k = k?;
            let (_, v, first) = firsts
                .iter()
                .find(|(key, _, _)| key.is(&k))
                .ok_or_else(|| {
                    PyRuntimeError::new_err("jit: sorted() gave a key the dict does not hold")
                })?;
            canonical_order(rt, v, *first, order)?;
        }
        return Ok(n);
    } else {
        return Err(PyTypeError::new_err("jit: not a node of a dispatched call"));
    };
    let mut n = 0;
    for c in &children {
        n += canonical_order(rt, c, start + n, order)?;
    }
    Ok(n)
}

/// The base class of `Jitted`: calls whose signature was registered run here; others
/// go to the subclass's `_call(args, kwargs)`.
#[pyclass(subclass, frozen, module = "ferrax._ir", name = "Dispatcher")]
pub struct Dispatcher {
    entries: Mutex<Vec<Arc<Entry>>>,
}

impl Dispatcher {
    fn entries(&self) -> MutexGuard<'_, Vec<Arc<Entry>>> {
        // No code that can panic runs under the lock; a poisoned one is still whole.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The result of a hit, or None for a miss; up to step `until` only (then the
    /// result is Python's None).
    fn hit<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
        until: Step,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let stop = || Ok(Some(py.None().into_bound(py)));
        if until == Step::Enter {
            return stop();
        }
        let Some(rt) = RUNTIME.get(py) else {
            return Ok(None);
        };
        if rt.staging(py)? {
            return Ok(None);
        }
        let x64 = rt.x64(py)?;
        if until == Step::State {
            return stop();
        }
        let Some(flat) = Flat::of(rt, args, kwargs) else {
            return Ok(None);
        };
        if until == Step::Flatten {
            return stop();
        }
        // The lock is held only while comparing (no Python code runs): an entry found
        // is shared, and runs after the lock is released (jaxlib releases the GIL).
        let entry = {
            let entries = self.entries();
            entries
                .iter()
                .rev()
                .find(|e| e.matches(py, x64, &flat))
                .cloned()
        };
        match entry {
            Some(_) if until == Step::Match => stop(),
            Some(e) => e.run(py, rt, &flat, until).map(Some),
            None => Ok(None),
        }
    }
}

#[pymethods]
impl Dispatcher {
    /// Takes (and ignores) the subclass's constructor arguments.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Dispatcher {
        Dispatcher {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Runs a registered signature, or the subclass's `_call(args, kwargs)`.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(out) = slf.get().hit(py, args, kwargs, Step::Wrap)? {
            return Ok(out);
        }
        let kwargs = match kwargs {
            Some(k) => k.clone(),
            None => PyDict::new(py),
        };
        slf.call_method1(intern!(py, "_call"), (args, kwargs))
    }

    /// Registers the signature of a call the Python path just ran on the default
    /// device: `flat` its argument leaves in the Python path's order; `program` is
    /// `(execute_sharded, consume_with_handlers, handlers, out_avals)`; `out_template`
    /// the output tree with leaf indices as leaves, else `unflatten(results)` builds
    /// it. Returns whether the call is one the hit path takes.
    #[pyo3(signature = (args, kwargs, flat, *, x64, consts, program, out_template, unflatten))]
    #[allow(clippy::too_many_arguments)] // one registration, all keyword-only
    fn _register(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: &Bound<'_, PyDict>,
        flat: &Bound<'_, PyList>,
        x64: bool,
        consts: Vec<Py<PyAny>>,
        program: (Py<PyAny>, Py<PyAny>, Py<PyAny>, Vec<Py<PyAny>>),
        out_template: &Bound<'_, PyAny>,
        unflatten: Py<PyAny>,
    ) -> PyResult<bool> {
        let Some(rt) = RUNTIME.get(py) else {
            return Ok(false);
        };
        let Some(natural) = Flat::of(rt, args, Some(kwargs)) else {
            return Ok(false);
        };
        let avals = natural
            .leaves
            .iter()
            .map(|l| l.aval.cast::<ShapedArray>().map(|a| a.clone().unbind()))
            .collect::<Result<Vec<_>, _>>();
        let Ok(avals) = avals else {
            return Ok(false);
        };
        let mut order = Vec::with_capacity(natural.leaves.len());
        let n = canonical_order(rt, args.as_any(), 0, &mut order)?;
        canonical_order(rt, kwargs.as_any(), n, &mut order)?;
        // The two paths must agree leaf by leaf, or the hit path is not taken.
        if order.len() != flat.len() || order.len() != natural.leaves.len() {
            return Ok(false);
        }
        for (i, &j) in order.iter().enumerate() {
            match natural.leaves.get(j) {
                Some(leaf) if leaf.object.is(&flat.get_item(i)?) => {}
                _ => return Ok(false),
            }
        }
        let identity = order.iter().enumerate().all(|(i, &j)| i == j);
        let (execute, consume, handlers, out_avals) = program;
        let out = Out::parse(out_template, out_avals.len()).unwrap_or(Out::Python(unflatten));
        let entry = Entry {
            x64,
            nodes: natural.nodes.to_vec(),
            keys: natural.keys.iter().map(|k| k.clone().unbind()).collect(),
            avals,
            order: (!identity).then_some(order),
            consts,
            execute,
            consume,
            handlers,
            out_avals,
            out,
        };
        // Entries replaced or dropped are freed after the lock is released: freeing
        // Python objects can run Python code (a finalizer calling this function).
        let dropped: Vec<Arc<Entry>> = {
            let mut entries = self.entries();
            let (same, mut kept): (Vec<_>, Vec<_>) = entries
                .drain(..)
                .partition(|e| e.matches(py, x64, &natural));
            let mut dropped = same;
            if kept.len() >= MAX_ENTRIES {
                dropped.push(kept.remove(0));
            }
            kept.push(Arc::new(entry));
            *entries = kept;
            dropped
        };
        drop(dropped);
        Ok(true)
    }

    /// The entries' Python objects, for the garbage collector (a cycle through a
    /// signature, e.g. a host callback holding the jitted function, is collectable).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never held while Python code runs (so while the collector runs) in this
        // thread or, holding the GIL, in another; skipping is only conservative.
        let Ok(entries) = self.entries.try_lock() else {
            return Ok(());
        };
        for e in entries.iter() {
            e.traverse(&visit)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        let entries = std::mem::take(&mut *self.entries());
        drop(entries);
    }

    /// The hit path of a call up to its step `step` (0: entering and leaving, 1: the
    /// trace state and x64 flag, 2: flattening, 3: matching, 4: `execute_sharded`, 5:
    /// `consume_with_handlers`, 6: wrapping, the whole call), for timing each step; None
    /// after steps before the last, the call's result after it. A miss is an error.
    #[pyo3(signature = (step, *args, **kwargs))]
    fn _hit_until<'py>(
        &self,
        py: Python<'py>,
        step: usize,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let until = *Step::ALL.get(step).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("no step {step} (0 to 6)"))
        })?;
        self.hit(py, args, kwargs, until)?
            .ok_or_else(|| PyRuntimeError::new_err("the call is not a hit"))
    }

    /// How many signatures the hit path holds.
    fn _hit_path_size(&self) -> usize {
        self.entries().len()
    }
}
