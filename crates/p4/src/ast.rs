//! The syntax tree of a P4_16 program, as written (before name resolution and type checking).
//! Every node carries the span it was parsed from.

use crate::diag::Span;
use crate::lexer::Token;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// `@name` or `@name(tokens...)` / `@name[...]`; the body is kept as tokens and read by the
/// phase that understands the annotation.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    pub name: Ident,
    pub body: Vec<Token>,
    pub span: Span,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    pub decls: Vec<Decl>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decl {
    pub annotations: Vec<Annotation>,
    pub kind: DeclKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    None,
    In,
    Out,
    InOut,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub annotations: Vec<Annotation>,
    pub direction: Direction,
    pub ty: Type,
    pub name: Ident,
    pub default: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub annotations: Vec<Annotation>,
    pub ty: Type,
    pub name: Ident,
}

/// A method of an extern: a constructor when `ret` is `None` and the name is the extern's.
#[derive(Clone, Debug, PartialEq)]
pub struct Method {
    pub annotations: Vec<Annotation>,
    pub is_abstract: bool,
    pub ret: Option<Type>,
    pub name: Ident,
    pub type_params: Vec<Ident>,
    pub params: Vec<Param>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DeclKind {
    Const {
        ty: Type,
        name: Ident,
        value: Expr,
    },
    Variable {
        ty: Type,
        name: Ident,
        init: Option<Expr>,
    },
    Typedef {
        ty: Type,
        name: Ident,
    },
    /// `type bit<8> T;`: a new type, not an alias.
    NewType {
        ty: Type,
        name: Ident,
    },
    Header {
        name: Ident,
        type_params: Vec<Ident>,
        fields: Vec<Field>,
    },
    HeaderUnion {
        name: Ident,
        type_params: Vec<Ident>,
        fields: Vec<Field>,
    },
    Struct {
        name: Ident,
        type_params: Vec<Ident>,
        fields: Vec<Field>,
    },
    Enum {
        name: Ident,
        underlying: Option<Type>,
        members: Vec<(Ident, Option<Expr>)>,
    },
    Error {
        members: Vec<Ident>,
    },
    MatchKind {
        members: Vec<Ident>,
    },
    Extern {
        name: Ident,
        type_params: Vec<Ident>,
        methods: Vec<Method>,
    },
    ExternFunction(Method),
    Function {
        ret: Type,
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
        body: Block,
    },
    Action {
        name: Ident,
        params: Vec<Param>,
        body: Block,
    },
    ParserType {
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
    },
    Parser {
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
        ctor_params: Vec<Param>,
        locals: Vec<Decl>,
        states: Vec<ParserState>,
    },
    ControlType {
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
    },
    Control {
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
        ctor_params: Vec<Param>,
        locals: Vec<Decl>,
        body: Block,
    },
    PackageType {
        name: Ident,
        type_params: Vec<Ident>,
        params: Vec<Param>,
    },
    /// `Type(args) name;` or `Type<T>(args) name;`.
    Instantiation {
        ty: Type,
        args: Vec<Arg>,
        name: Ident,
    },
    Table {
        name: Ident,
        props: Vec<TableProperty>,
    },
    ValueSet {
        ty: Type,
        size: Expr,
        name: Ident,
    },
}

impl DeclKind {
    /// The declared name, if the declaration has one.
    pub fn name(&self) -> Option<&Ident> {
        use DeclKind::*;
        match self {
            Const { name, .. }
            | Variable { name, .. }
            | Typedef { name, .. }
            | NewType { name, .. }
            | Header { name, .. }
            | HeaderUnion { name, .. }
            | Struct { name, .. }
            | Enum { name, .. }
            | Extern { name, .. }
            | Function { name, .. }
            | Action { name, .. }
            | ParserType { name, .. }
            | Parser { name, .. }
            | ControlType { name, .. }
            | Control { name, .. }
            | PackageType { name, .. }
            | Instantiation { name, .. }
            | Table { name, .. }
            | ValueSet { name, .. } => Some(name),
            ExternFunction(m) => Some(&m.name),
            Error { .. } | MatchKind { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Type {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    Bool,
    Error,
    String,
    Void,
    MatchKind,
    /// `_` in a type argument position.
    DontCare,
    /// `bit<W>` (and bare `bit`, width 1).
    Bit(Box<Expr>),
    Int(Box<Expr>),
    /// `int` without a width: an arbitrary-precision integer (compile-time values only).
    InfInt,
    Varbit(Box<Expr>),
    /// A named type, possibly specialised: `H`, `register<bit<32>>`.
    Named {
        name: Ident,
        args: Vec<Type>,
    },
    /// `T[N]`: a header stack (or array).
    Stack {
        elem: Box<Type>,
        size: Box<Expr>,
    },
    Tuple(Vec<Type>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Not,
    BitNot,
    Neg,
    Plus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Mod,
    Add,
    Sub,
    AddSat,
    SubSat,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    BitAnd,
    BitXor,
    BitOr,
    Concat,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Mul => "*",
            Div => "/",
            Mod => "%",
            Add => "+",
            Sub => "-",
            AddSat => "|+|",
            SubSat => "|-|",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Eq => "==",
            Ne => "!=",
            BitAnd => "&",
            BitXor => "^",
            BitOr => "|",
            Concat => "++",
            And => "&&",
            Or => "||",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int {
        value: u128,
        width: Option<u32>,
        signed: bool,
    },
    Bool(bool),
    Str(String),
    Name(Ident),
    /// `.name`: a name looked up at the top level only.
    TopName(Ident),
    Member(Box<Expr>, Ident),
    Index(Box<Expr>, Box<Expr>),
    Slice {
        base: Box<Expr>,
        hi: Box<Expr>,
        lo: Box<Expr>,
    },
    Call {
        callee: Box<Expr>,
        type_args: Vec<Type>,
        args: Vec<Arg>,
    },
    Unary(UnOp, Box<Expr>),
    /// `a op b`; the span is the operator's, for errors about the operator itself.
    Binary(BinOp, Box<Expr>, Box<Expr>, Span),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(Type, Box<Expr>),
    /// `{a, b}`: a list (tuple) expression.
    List(Vec<Expr>),
    /// `{f = a, g = b}`: a struct-valued expression.
    StructInit(Vec<(Ident, Expr)>),
    /// A type used where a value is expected: `error.NoError`'s `error`, `bit<8>` in `.minSizeInBits`.
    TypeRef(Type),
    /// `a &&& b` in a keyset or entry.
    Mask(Box<Expr>, Box<Expr>),
    /// `a .. b` in a keyset or entry.
    Range(Box<Expr>, Box<Expr>),
    /// `_`
    DontCare,
    /// `default` in a keyset.
    Default,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Empty,
    Assign {
        lhs: Expr,
        rhs: Expr,
    },
    /// `lhs op= rhs`
    CompoundAssign {
        op: BinOp,
        lhs: Expr,
        rhs: Expr,
    },
    /// A call used as a statement (method, action, function or extern).
    Call(Expr),
    If {
        cond: Expr,
        then: Box<Stmt>,
        els: Option<Box<Stmt>>,
    },
    Block(Block),
    Exit,
    Return(Option<Expr>),
    Switch {
        expr: Expr,
        cases: Vec<SwitchCase>,
    },
    Decl(Box<Decl>),
    /// `for (init; cond; update) body` (P4_16 1.2.5).
    For {
        init: Vec<Stmt>,
        cond: Option<Expr>,
        update: Vec<Stmt>,
        body: Box<Stmt>,
    },
    /// `for (T x in lo .. hi) body`.
    ForIn {
        ty: Type,
        name: Ident,
        range: Expr,
        body: Box<Stmt>,
    },
    Break,
    Continue,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SwitchCase {
    /// Labels sharing the body; `ExprKind::Default` for `default`.
    pub labels: Vec<Expr>,
    /// `None` for a fall-through label (`a:` followed by another label).
    pub body: Option<Block>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParserState {
    pub annotations: Vec<Annotation>,
    pub name: Ident,
    pub stmts: Vec<Stmt>,
    pub transition: Option<Transition>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    Goto(Ident),
    Select { exprs: Vec<Expr>, cases: Vec<SelectCase>, span: Span },
}

#[derive(Clone, Debug, PartialEq)]
pub struct SelectCase {
    /// One element per select expression (a single `default`/`_` matches all).
    pub keyset: Vec<Expr>,
    pub next: Ident,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TableProperty {
    pub annotations: Vec<Annotation>,
    pub is_const: bool,
    pub name: Ident,
    pub value: PropertyValue,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PropertyValue {
    Key(Vec<KeyElement>),
    Actions(Vec<ActionRef>),
    Entries(Vec<Entry>),
    Expr(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct KeyElement {
    pub annotations: Vec<Annotation>,
    pub expr: Expr,
    pub match_kind: Ident,
}

/// An action named in `actions = {...}` or `default_action`, possibly with arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionRef {
    pub annotations: Vec<Annotation>,
    pub name: Expr,
    pub args: Vec<Arg>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub annotations: Vec<Annotation>,
    pub is_const: bool,
    pub priority: Option<Expr>,
    pub keyset: Vec<Expr>,
    pub action: ActionRef,
    pub span: Span,
}

/// A node of an expression tree: expressions hold types (casts, type arguments) and types
/// hold expressions (widths, stack sizes).
#[derive(Clone, Copy)]
enum Node<'a> {
    Expr(&'a Expr),
    Type(&'a Type),
}

impl Expr {
    /// Nodes on the longest path from this expression down to a leaf, types inside it
    /// included. Measured without recursion: it runs on trees not yet known to be shallow.
    pub fn height(&self) -> usize {
        height(Node::Expr(self))
    }
}

impl Type {
    /// Like [`Expr::height`], for a type.
    pub fn height(&self) -> usize {
        height(Node::Type(self))
    }
}

fn height(root: Node<'_>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        let below = depth + 1;
        match node {
            Node::Expr(e) => match &e.kind {
                ExprKind::Int { .. }
                | ExprKind::Bool(_)
                | ExprKind::Str(_)
                | ExprKind::Name(_)
                | ExprKind::TopName(_)
                | ExprKind::DontCare
                | ExprKind::Default => {}
                ExprKind::Member(a, _) | ExprKind::Unary(_, a) => stack.push(at(a, below)),
                ExprKind::Index(a, b)
                | ExprKind::Binary(_, a, b, _)
                | ExprKind::Mask(a, b)
                | ExprKind::Range(a, b) => stack.extend([at(a, below), at(b, below)]),
                ExprKind::Slice { base: a, hi: b, lo: c } | ExprKind::Ternary(a, b, c) => {
                    stack.extend([at(a, below), at(b, below), at(c, below)])
                }
                ExprKind::Call { callee, type_args, args } => {
                    stack.push(at(callee, below));
                    stack.extend(type_args.iter().map(|t| (Node::Type(t), below)));
                    stack.extend(args.iter().map(|a| at(&a.value, below)));
                }
                ExprKind::Cast(t, a) => stack.extend([(Node::Type(t), below), at(a, below)]),
                ExprKind::List(items) => stack.extend(items.iter().map(|e| at(e, below))),
                ExprKind::StructInit(fields) => {
                    stack.extend(fields.iter().map(|(_, e)| at(e, below)))
                }
                ExprKind::TypeRef(t) => stack.push((Node::Type(t), below)),
            },
            Node::Type(t) => match &t.kind {
                TypeKind::Bool
                | TypeKind::Error
                | TypeKind::String
                | TypeKind::Void
                | TypeKind::MatchKind
                | TypeKind::DontCare
                | TypeKind::InfInt => {}
                TypeKind::Bit(w) | TypeKind::Int(w) | TypeKind::Varbit(w) => {
                    stack.push(at(w, below))
                }
                TypeKind::Named { args, .. } | TypeKind::Tuple(args) => {
                    stack.extend(args.iter().map(|t| (Node::Type(t), below)))
                }
                TypeKind::Stack { elem, size } => {
                    stack.extend([(Node::Type(elem), below), at(size, below)])
                }
            },
        }
    }
    deepest
}

fn at(e: &Expr, depth: usize) -> (Node<'_>, usize) {
    (Node::Expr(e), depth)
}
