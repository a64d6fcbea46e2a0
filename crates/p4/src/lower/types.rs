//! Declaring types as the program uses them: structs, headers and unions (their fields
//! checked), the instances of generic ones, tuple types (each a struct of its own), and the
//! layout of structs held in headers.

use super::{Lowerer, Storage};
use crate::ast::{self, Decl, DeclKind};
use crate::budget::Budget;
use crate::diag::{DResult, Span};
use crate::ir::{HdrRef, Place};
use crate::types::{resolve_type, Composite, CompositeKind, FieldDef, Ty};

impl<'a> Lowerer<'a> {
    /// A composite's name for messages and the P4Info: `full`, or when that grows long (types
    /// nested in types), its start and the composite's index.
    pub(super) fn display_name(full: String, index: usize) -> String {
        const MAX: usize = 96;
        if full.len() <= MAX {
            return full;
        }
        let cut = (0..=MAX).rev().find(|&i| full.is_char_boundary(i)).unwrap_or(0);
        format!("{}…#{index}", &full[..cut])
    }

    /// `ty` with every tuple type made a struct of its own (fields `0`, `1`, ...: reached by
    /// a constant index), declared once per list of element types, so that tuples are
    /// variables, parameters and fields like structs.
    pub(super) fn tuples_as_structs(&mut self, ty: Ty, span: Span) -> DResult<Ty> {
        Ok(match ty {
            Ty::Tuple(items) => {
                let items = items
                    .into_iter()
                    .map(|t| self.tuples_as_structs(t, span))
                    .collect::<DResult<Vec<Ty>>>()?;
                // Keyed by structure (composites by index), so the key stays short however
                // deep tuples nest.
                let key = format!("tuple{items:?}");
                if let Some(t) = self.types.names.get(&key) {
                    return Ok(t.clone());
                }
                let index = self.types.composites.len();
                let depth = 1 + items.iter().map(|t| self.type_depth(t)).max().unwrap_or(0);
                let limit = self.spent.limits.nesting_depth;
                if depth > limit {
                    let what = format!("tuple types nest deeper than {limit}");
                    return Err(self.over_budget(span, what, Budget::NestingDepth));
                }
                let name = Self::display_name(self.types.show(&Ty::Tuple(items.clone())), index);
                self.types.composites.push(Composite {
                    name,
                    kind: CompositeKind::Struct,
                    fields: items
                        .into_iter()
                        .enumerate()
                        .map(|(i, ty)| FieldDef {
                            name: i.to_string(),
                            ty,
                            annotations: Vec::new(),
                        })
                        .collect(),
                    annotations: Vec::new(),
                    span: Span::default(),
                });
                self.composite_depth.push(depth);
                self.tuple_types.insert(index);
                self.types.names.insert(key, Ty::Struct(index));
                Ty::Struct(index)
            }
            Ty::Stack(elem, n) => Ty::Stack(Box::new(self.tuples_as_structs(*elem, span)?), n),
            other => other,
        })
    }

    /// Declare each generic struct or header `t` names with type arguments (`S<bit<8>>`) as a
    /// type of its own, its type parameters replaced, once per distinct set of arguments.
    pub(super) fn instantiate_generics(&mut self, t: &ast::Type) -> DResult<()> {
        match &t.kind {
            ast::TypeKind::Named { name, args } => {
                for a in args {
                    self.instantiate_generics(a)?;
                }
                let Some(d) = self.generic_types.get(&name.name).copied() else {
                    return Ok(());
                };
                let (DeclKind::Header { type_params, fields, .. }
                | DeclKind::HeaderUnion { type_params, fields, .. }
                | DeclKind::Struct { type_params, fields, .. }) = &d.kind
                else {
                    return Ok(());
                };
                if args.len() != type_params.len() {
                    return self.err(
                        t.span,
                        format!(
                            "`{}` takes {} type argument(s), {} given",
                            name.name,
                            type_params.len(),
                            args.len()
                        ),
                    );
                }
                let tys = args
                    .iter()
                    .map(|a| resolve_type(&self.types, &self.consts, Some(&*self), a))
                    .collect::<DResult<Vec<_>>>()?;
                let key = crate::types::generic_key(&name.name, &tys);
                if self.types.names.contains_key(&key) {
                    return Ok(());
                }
                // A generic whose fields instantiate it again with a bigger argument would
                // never end.
                let limit = self.spent.limits.nesting_depth;
                if self.generic_frames.len() >= limit {
                    let what = format!("generic types instantiate each other deeper than {limit}");
                    return Err(self.over_budget(t.span, what, Budget::NestingDepth));
                }
                let shown: Vec<String> = tys.iter().map(|t| self.types.show(t)).collect();
                let display = format!("{}<{}>", name.name, shown.join(", "));
                let display = Self::display_name(display, self.types.composites.len());
                // The type parameters name the arguments while the fields are resolved, and
                // only this instance's: an enclosing instantiation's are hidden again.
                self.set_generic_frames(false);
                let frame: Vec<(String, Option<Ty>, Ty)> = type_params
                    .iter()
                    .zip(tys)
                    .map(|(p, ty)| {
                        let prev = self.types.names.insert(p.name.clone(), ty.clone());
                        (p.name.clone(), prev, ty)
                    })
                    .collect();
                self.generic_frames.push(frame);
                let r = self.declare_composite(d, &key, fields).map(|()| {
                    if let Some(Ty::Struct(i) | Ty::Header(i) | Ty::Union(i)) =
                        self.types.names.get(&key)
                    {
                        self.types.composites[*i].name = display;
                    }
                });
                let frame = self.generic_frames.pop().unwrap_or_default();
                for (p, prev, _) in frame.into_iter().rev() {
                    match prev {
                        Some(ty) => self.types.names.insert(p, ty),
                        None => self.types.names.remove(&p),
                    };
                }
                self.set_generic_frames(true);
                r
            }
            ast::TypeKind::Stack { elem, .. } => self.instantiate_generics(elem),
            ast::TypeKind::Tuple(ts) => ts.iter().try_for_each(|x| self.instantiate_generics(x)),
            _ => Ok(()),
        }
    }

    /// Bind (`on`) or unbind the type parameters of the instantiations in progress, outer
    /// ones first when binding.
    fn set_generic_frames(&mut self, on: bool) {
        let frames = std::mem::take(&mut self.generic_frames);
        let order: Vec<&(String, Option<Ty>, Ty)> = if on {
            frames.iter().flatten().collect()
        } else {
            frames.iter().rev().flat_map(|f| f.iter().rev()).collect()
        };
        for (p, prev, bound) in order {
            match (on, prev) {
                (true, _) => self.types.names.insert(p.clone(), bound.clone()),
                (false, Some(ty)) => self.types.names.insert(p.clone(), ty.clone()),
                (false, None) => self.types.names.remove(p),
            };
        }
        self.generic_frames = frames;
    }

    /// The storage of a value of type `ty` held in header `hdr` from bit `bit_off`: a scalar
    /// field, or a struct (a header may hold structs of bit fields) whose fields are the
    /// header's bits in turn.
    pub(super) fn header_bits(&self, hdr: &HdrRef, ty: &Ty, bit_off: u32) -> Storage {
        match ty {
            Ty::Struct(s) => {
                let mut off = bit_off;
                let fields = self.types.composites[*s]
                    .fields
                    .iter()
                    .map(|f| {
                        let storage = self.header_bits(hdr, &f.ty, off);
                        off += self.types.bits(&f.ty).unwrap_or(0);
                        storage
                    })
                    .collect();
                Storage::Struct { ty: *s, fields }
            }
            _ => Storage::Scalar {
                place: Place::Field {
                    hdr: hdr.clone(),
                    bit_off,
                    width: self.types.bits(ty).unwrap_or(0),
                },
                ty: ty.clone(),
            },
        }
    }

    /// Header type `ty`'s scalar fields in order as (bit offset, width), a struct field's
    /// fields in its place (so none is wider than its own type); `None` for a varbit.
    pub(crate) fn header_leaves(&self, ty: usize) -> Vec<Option<(u32, u32)>> {
        fn walk(
            types: &crate::types::Types,
            ty: &Ty,
            off: &mut u32,
            out: &mut Vec<Option<(u32, u32)>>,
        ) {
            match ty {
                Ty::Struct(s) => {
                    for f in &types.composites[*s].fields {
                        walk(types, &f.ty, off, out);
                    }
                }
                Ty::Varbit(_) => out.push(None),
                _ => {
                    let w = types.bits(ty).unwrap_or(0);
                    out.push(Some((*off, w)));
                    *off += w;
                }
            }
        }
        let mut out = Vec::new();
        let mut off = 0;
        for f in &self.types.composites[ty].fields {
            walk(&self.types, &f.ty, &mut off, &mut out);
        }
        out
    }

    /// Whether `ty` may be a header's field: bits, a bool, a serializable enum, or a struct of
    /// such (spec 7.2.2), with no varbit inside a struct.
    fn header_field_type(&self, ty: &Ty) -> bool {
        match ty {
            Ty::Bit(_) | Ty::Int(_) | Ty::Varbit(_) | Ty::Bool => true,
            Ty::Enum(e) => self.types.enums[*e].repr.is_some(),
            // Not a tuple, which P4 does not allow in a header.
            Ty::Struct(s) => {
                !self.tuple_types.contains(s)
                    && self.types.composites[*s]
                        .fields
                        .iter()
                        .all(|f| !matches!(f.ty, Ty::Varbit(_)) && self.header_field_type(&f.ty))
            }
            _ => false,
        }
    }

    /// Declare the struct, header or union `d` as the type `name` (its own name, or a generic
    /// one's with its arguments), its fields resolved in the current type names.
    pub(super) fn declare_composite(
        &mut self,
        d: &'a Decl,
        name: &str,
        fields: &'a [ast::Field],
    ) -> DResult<()> {
        let span = d.kind.name().map_or(d.span, |n| n.span);
        let kind = match &d.kind {
            DeclKind::Header { .. } => CompositeKind::Header,
            DeclKind::HeaderUnion { .. } => CompositeKind::Union,
            _ => CompositeKind::Struct,
        };
        let index = self.types.composites.len();
        let ty = match kind {
            CompositeKind::Header => Ty::Header(index),
            CompositeKind::Union => Ty::Union(index),
            CompositeKind::Struct => Ty::Struct(index),
        };
        // Registered before its fields so that an error can name it.
        self.types.names.insert(name.to_string(), ty);
        self.types.composites.push(Composite {
            name: name.to_string(),
            kind,
            fields: Vec::new(),
            annotations: d.annotations.clone(),
            span,
        });
        self.composite_depth.push(1);
        let mut defs = Vec::new();
        for f in fields {
            if defs.iter().any(|x: &FieldDef| x.name == f.name.name) {
                return self.err(f.name.span, format!("field `{}` declared twice", f.name.name));
            }
            let fty = self.resolve(&f.ty)?;
            // The type is registered before its fields (so errors can name it), which
            // lets a field name it: a value of the type would have no finite size.
            if mentions_composite(&self.types, &fty, index) {
                return self.err(
                    f.ty.span,
                    format!("`{}` is a recursive type: field `{}` contains it", name, f.name.name),
                );
            }
            let ok = match kind {
                CompositeKind::Header => self.header_field_type(&fty),
                CompositeKind::Union => matches!(fty, Ty::Header(_)),
                CompositeKind::Struct => {
                    !matches!(fty, Ty::Void | Ty::String | Ty::Extern(..) | Ty::InfInt)
                }
            };
            if !ok {
                return self.err(
                    f.ty.span,
                    format!("a {kind:?} cannot have a field of type {}", self.show(&fty))
                        .to_lowercase(),
                );
            }
            defs.push(FieldDef {
                name: f.name.name.clone(),
                ty: fty,
                annotations: f.annotations.clone(),
            });
        }
        // Every pass that walks a value of this type recurses once per level.
        let depth = 1 + defs.iter().map(|f| self.type_depth(&f.ty)).max().unwrap_or(0);
        let limit = self.spent.limits.nesting_depth;
        if depth > limit {
            let what = format!("`{}`: types nest deeper than {limit}", name);
            return Err(self.over_budget(span, what, Budget::NestingDepth));
        }
        self.composite_depth[index] = depth;
        self.types.composites[index].fields = defs;
        Ok(())
    }
}

/// Whether `ty` is, or holds a value of, the composite type `index`.
/// Whether a value of `ty` contains one of composite `index`, at any depth (through the
/// fields of other composites too: a tuple type is one, declared on the spot).
fn mentions_composite(types: &crate::types::Types, ty: &crate::types::Ty, index: usize) -> bool {
    fn walk(
        types: &crate::types::Types,
        ty: &crate::types::Ty,
        index: usize,
        seen: &mut std::collections::HashSet<usize>,
    ) -> bool {
        use crate::types::Ty;
        match ty {
            // Composites declared before `index` cannot contain it; those declared since (a
            // tuple or generic instance made while its fields resolved) are looked through,
            // each once.
            Ty::Struct(i) | Ty::Union(i) | Ty::Header(i) => {
                *i == index
                    || (*i > index
                        && seen.insert(*i)
                        && types.composites[*i]
                            .fields
                            .iter()
                            .any(|f| walk(types, &f.ty, index, seen)))
            }
            Ty::Stack(elem, _) => walk(types, elem, index, seen),
            Ty::Tuple(items) => items.iter().any(|t| walk(types, t, index, seen)),
            _ => false,
        }
    }
    walk(types, ty, index, &mut Default::default())
}
