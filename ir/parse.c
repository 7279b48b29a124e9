/*
 * parse.c — the IR text format, from text to Graph.
 *
 * The format is small and MLIR-like; doc/ir.md holds the full grammar with
 * examples. A file is a list of symbol declarations followed by one graph:
 *
 *   sym S <= 512
 *   graph @f(%x: f32[B, S]) {
 *     %0 = reduce(%x) {kind = sum, axes = [1], keepdims = 0} : f32[B]
 *     return %0
 *   }
 *
 * The parser is a hand-written recursive-descent parser in the style of
 * chibicc: one function per grammar rule, the rule written as a comment
 * above it. A few points of design are worth knowing before reading on.
 *
 * Tokens are produced lazily into a buffer, so the first error reported is
 * always the first error in the text (an unterminated string far below does
 * not hide a syntax error above it). The buffer also lets the parser go
 * back: a constant's payload (`dense<...>`) comes before its type, yet its
 * elements can only be decoded once the type is known, so the parser skips
 * over the payload, reads the type, and returns to the payload. Tokens never
 * move in memory (the buffer holds pointers), so a Token pointer stays valid
 * for the whole statement; between statements the consumed tokens are
 * recycled, so the buffer never holds more than one statement's tokens.
 *
 * Attributes are parsed under the op's schema (op_attr_spec): the schema
 * says whether `axes = [...]` holds integers, floats or dim expressions, and
 * which bare words an enum allows. Dims are built through dim_add, dim_mul
 * and friends, so they come out in canonical form whatever way they were
 * written; printing them again gives dim_print's form.
 *
 * The parser does not run the ops' type rules: it builds exactly what the
 * text says (graph_append_op plus the attributes), and graph_verify checks
 * the result afterwards. What the parser does check is everything needed to
 * build a well-formed Graph at all: known ops and dtypes, defined values,
 * operand and result counts, attribute names, kinds and enum words, required
 * attributes, and constant sizes.
 *
 * Value names live in two namespaces. `%12` (unquoted, all digits) is an
 * unnamed value: it gets name NULL, and the printer numbers unnamed values
 * afresh. Any other name, `%x` or `%"x"` alike, is a named value. So `%3`
 * and `%"3"` are different values, and printing after parsing gives back
 * the same text.
 *
 * Errors are reported once, as "file:line:col: error: message" followed by
 * the source line and a caret; the first error stops the parse, and
 * everything allocated so far is released. No input makes the parser abort.
 */
#include "ir/ir.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_DEPTH = 256 }; /* nesting limit of dim expressions */
enum { MAX_REGION_DEPTH = 32, MAX_REGIONS = 2 }; /* regions in regions; regions of one op */

typedef enum TokKind {
    TK_IDENT, /* [A-Za-z_][A-Za-z0-9_]* */
    TK_NUM,   /* a digit, then [0-9A-Za-z_.] and signs after an exponent */
    TK_STR,   /* "..." with C escapes; decoded text in str */
    TK_VAL,   /* %name or %"name"; the name in str */
    TK_AT,    /* @name or @"name"; the name in str */
    TK_PUNCT, /* ( ) [ ] { } < > , : = * + - <= >= */
    TK_EOF,
} TokKind;

typedef struct Token {
    TokKind kind;
    const char *loc; /* first byte in the source */
    size_t len;      /* length in the source */
    int line, col;
    const char *str; /* STR, VAL, AT: the decoded text (scratch arena) */
    size_t slen;
    bool quoted;     /* VAL, AT: written with quotes */
} Token;

/* A defined value; key is the name, ns 'u' for unnamed (%12), 'n' else. */
typedef struct Entry {
    const char *key;
    size_t klen;
    char ns;
    Value *v;
} Entry;

typedef struct Parser {
    const char *src, *end;
    const char *file; /* for messages */
    const char *dir;  /* directory of file, for file<> paths; "" if none */
    const char *cur;  /* lexer position */
    const char *bol;  /* beginning of the lexer's line */
    int line;
    Token **toks;     /* lexed tokens; toks[pos] is the next one, and */
    int ntoks, pos;   /* toks[ntoks..nalloc) are spare, for reuse */
    int nalloc, captoks;
    Token eof;        /* handed out after a lexer error */
    Arena tmp;        /* scratch, freed when parsing ends */
    Diag diag;
    bool err;
    bool oom;         /* an allocation outside the arenas failed */
    Graph *g;
    Entry *tab;       /* defined values, open addressing */
    size_t tabcap, tabn;
    int depth;        /* regions being parsed, one inside the other */
} Parser;

/* ---- diagnostics ----------------------------------------------------- */

/* Formats "file:line:col: error: msg", the source line and a caret under
 * the column. Long lines are shown as a window around the column. */
static bool verror_at(Parser *P, const char *loc, int line, int col, const char *fmt, va_list ap)
{
    if (P->err)
        return false;
    P->err = true;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);

    const char *bol = loc, *eol = loc;
    while (bol > P->src && bol[-1] != '\n')
        bol--;
    while (eol < P->end && *eol != '\n')
        eol++;
    if (eol > bol && eol[-1] == '\r' && eol > loc)
        eol--;
    const char *ws = bol, *we = eol;
    if (loc - ws > 100)
        ws = loc - 60;
    if (we - ws > 160)
        we = ws + 160;
    char caret[200];
    size_t n = 0;
    for (const char *p = ws; p < loc && n < sizeof caret - 2; p++)
        caret[n++] = *p == '\t' ? '\t' : ' ';
    caret[n++] = '^';
    caret[n] = 0;
    /* a failed allocation makes any error that follows a resource error */
    bool oom = P->oom || P->tmp.failed || (P->g && P->g->arena.failed);
    diag_setk(&P->diag, oom ? DIAG_RESOURCE : DIAG_PARSE, "%s:%d:%d: error: %s\n%.*s\n%s", P->file, line, col,
              msg, (int)(we - ws), ws, caret);
    diag_locate(&P->diag, P->file, line, col, 0);
    return false;
}

__attribute__((format(printf, 3, 4)))
static bool error_at(Parser *P, const Token *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror_at(P, t->loc, t->line, t->col, fmt, ap);
    va_end(ap);
    return false;
}

__attribute__((format(printf, 3, 4)))
static bool error_here(Parser *P, const char *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror_at(P, loc, P->line, (int)(loc - P->bol) + 1, fmt, ap);
    va_end(ap);
    return false;
}

static bool oom(Parser *P, const Token *t)
{
    P->oom = true;
    return error_at(P, t, "out of memory");
}

static bool oom_here(Parser *P, const char *loc)
{
    P->oom = true;
    return error_here(P, loc, "out of memory");
}

/* ---- lexer ----------------------------------------------------------- */

static bool is_ident_start(int c) { return isalpha(c) || c == '_'; }
static bool is_ident_char(int c) { return isalnum(c) || c == '_'; }
static bool is_name_char(int c) { return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '-'; }

/* Decodes the string literal starting at P->cur (on the opening quote)
 * into the scratch arena. Escapes: \n \t \r \a \b \f \v \\ \" \' \?, octal
 * \o \oo \ooo, and hex \xH \xHH (at most two digits). */
static bool lex_string(Parser *P, Token *t)
{
    const char *start = P->cur, *p = start + 1;
    while (p < P->end && *p != '"') {
        if (*p == '\n')
            break;
        if (*p == '\\' && p + 1 < P->end && p[1] != '\n')
            p++;
        p++;
    }
    if (p >= P->end || *p != '"')
        return error_here(P, start, "unterminated string");
    char *buf = arena_alloc(&P->tmp, (size_t)(p - start));
    if (!buf)
        return oom_here(P, start);
    size_t n = 0;
    for (const char *q = start + 1; q < p;) {
        if (*q != '\\') {
            buf[n++] = *q++;
            continue;
        }
        const char *esc = q++;
        int c = (unsigned char)*q++;
        switch (c) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'a': c = '\a'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'v': c = '\v'; break;
        case '\\': case '"': case '\'': case '?': break;
        case 'x': {
            int v = 0, k = 0;
            for (; k < 2 && q < p && isxdigit((unsigned char)*q); k++, q++)
                v = v * 16 + (isdigit((unsigned char)*q) ? *q - '0' : tolower((unsigned char)*q) - 'a' + 10);
            if (k == 0)
                return error_here(P, esc, "\\x used with no following hex digits");
            c = v;
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                int v = c - '0';
                for (int k = 1; k < 3 && q < p && *q >= '0' && *q <= '7'; k++, q++)
                    v = v * 8 + (*q - '0');
                if (v > 255)
                    return error_here(P, esc, "octal escape out of range");
                c = v;
                break;
            }
            return error_here(P, esc, "unknown escape sequence");
        }
        if (c == 0)
            return error_here(P, esc, "null character in string");
        buf[n++] = (char)c;
    }
    buf[n] = 0;
    t->str = buf;
    t->slen = n;
    P->cur = p + 1;
    return true;
}

/* Lexes one token into t. Whitespace and '#' comments are skipped. */
static bool lex(Parser *P, Token *t)
{
    const char *prev_end = P->cur, *prev_bol = P->bol;
    int prev_line = P->line;
    for (;;) {
        if (P->cur < P->end && *P->cur == '\n') {
            P->cur++;
            P->line++;
            P->bol = P->cur;
        } else if (P->cur < P->end && (*P->cur == ' ' || *P->cur == '\t' || *P->cur == '\r' ||
                                       *P->cur == '\f' || *P->cur == '\v')) {
            P->cur++;
        } else if (P->cur < P->end && *P->cur == '#') {
            while (P->cur < P->end && *P->cur != '\n')
                P->cur++;
        } else {
            break;
        }
    }
    memset(t, 0, sizeof *t);
    t->loc = P->cur;
    t->line = P->line;
    t->col = (int)(P->cur - P->bol) + 1;
    if (P->cur == P->end) {
        /* point just past the last token, not at an empty last line */
        t->kind = TK_EOF;
        t->loc = prev_end;
        t->line = prev_line;
        t->col = (int)(prev_end - prev_bol) + 1;
        return true;
    }
    const char *s = P->cur;
    int c = (unsigned char)*s;
    if (is_ident_start(c)) {
        while (P->cur < P->end && is_ident_char((unsigned char)*P->cur))
            P->cur++;
        t->kind = TK_IDENT;
    } else if (isdigit(c)) {
        bool hex = P->end - s > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
        while (P->cur < P->end) {
            int d = (unsigned char)*P->cur;
            if (is_ident_char(d) || d == '.')
                P->cur++;
            else if ((d == '+' || d == '-') && !hex && (P->cur[-1] == 'e' || P->cur[-1] == 'E'))
                P->cur++;
            else
                break;
        }
        t->kind = TK_NUM;
    } else if (c == '"') {
        if (!lex_string(P, t))
            return false;
        t->kind = TK_STR;
    } else if (c == '%' || c == '@') {
        t->kind = c == '%' ? TK_VAL : TK_AT;
        P->cur++;
        if (P->cur < P->end && *P->cur == '"') {
            if (!lex_string(P, t))
                return false;
            t->quoted = true;
        } else {
            const char *n = P->cur;
            while (P->cur < P->end && is_name_char((unsigned char)*P->cur))
                P->cur++;
            if (P->cur == n)
                return error_here(P, s, "expected a name after '%c'", c);
            t->str = n;
            t->slen = (size_t)(P->cur - n);
        }
    } else if ((c == '<' || c == '>') && P->end - s > 1 && s[1] == '=') {
        P->cur += 2;
        t->kind = TK_PUNCT;
    } else if (c && strchr("()[]{}<>,:=*+-", c)) {
        P->cur++;
        t->kind = TK_PUNCT;
    } else {
        if (isprint(c))
            return error_here(P, s, "unexpected character '%c'", c);
        return error_here(P, s, "unexpected byte 0x%02x", c);
    }
    t->len = (size_t)(P->cur - s);
    return true;
}

/* The k-th token ahead, lexed on demand. After a lexer error, an EOF
 * token (the parse is over by then). Tokens never move in memory, so a
 * Token pointer stays valid until the statement ends (see release). */
static Token *peek_at(Parser *P, int k)
{
    while (P->ntoks <= P->pos + k) {
        if (P->err)
            return &P->eof;
        if (P->ntoks == P->nalloc) {
            if (P->nalloc == P->captoks) {
                int cap = P->captoks ? 2 * P->captoks : 64;
                Token **nt = realloc(P->toks, (size_t)cap * sizeof *nt);
                if (!nt) {
                    oom_here(P, P->cur);
                    return &P->eof;
                }
                P->toks = nt;
                P->captoks = cap;
            }
            if (!(P->toks[P->nalloc] = arena_alloc(&P->tmp, sizeof(Token)))) {
                oom_here(P, P->cur);
                return &P->eof;
            }
            P->nalloc++;
        }
        if (!lex(P, P->toks[P->ntoks])) {
            P->eof.loc = P->cur;
            P->eof.line = P->line;
            P->eof.col = (int)(P->cur - P->bol) + 1;
            return &P->eof;
        }
        P->ntoks++;
    }
    return P->toks[P->pos + k];
}

static Token *peek(Parser *P) { return peek_at(P, 0); }

static void reverse(Token **v, int n)
{
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        Token *t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Forgets the tokens already consumed, keeping them as spares: rotates
 * toks[0..ntoks) left by pos. Called between statements, when no Token
 * pointer is held. */
static void release(Parser *P)
{
    if (P->pos == 0)
        return;
    reverse(P->toks, P->pos);
    reverse(P->toks + P->pos, P->ntoks - P->pos);
    reverse(P->toks, P->ntoks);
    P->ntoks -= P->pos;
    P->pos = 0;
}

static Token *next(Parser *P)
{
    Token *t = peek(P);
    if (t->kind != TK_EOF)
        P->pos++;
    return t;
}

static bool tok_is(const Token *t, TokKind k, const char *s)
{
    return t->kind == k && t->len == strlen(s) && memcmp(t->loc, s, t->len) == 0;
}

static bool is(Parser *P, const char *punct) { return tok_is(peek(P), TK_PUNCT, punct); }
static bool is_word(Parser *P, const char *w) { return tok_is(peek(P), TK_IDENT, w); }

/* Consumes the punctuation if it is next. */
static bool consume(Parser *P, const char *punct)
{
    if (!is(P, punct))
        return false;
    P->pos++;
    return true;
}

/* Describes a token for "expected X, got Y" messages. */
static const char *describe(Parser *P, const Token *t)
{
    if (t->kind == TK_EOF)
        return "end of file";
    size_t n = t->len > 40 ? 40 : t->len;
    return arena_printf(&P->tmp, "'%.*s%s'", (int)n, t->loc, n < t->len ? "..." : "");
}

static bool expect(Parser *P, const char *punct)
{
    if (consume(P, punct))
        return true;
    Token *t = peek(P);
    return error_at(P, t, "expected '%s', got %s", punct, describe(P, t));
}

static bool expect_word(Parser *P, const char *w)
{
    if (is_word(P, w)) {
        P->pos++;
        return true;
    }
    Token *t = peek(P);
    return error_at(P, t, "expected '%s', got %s", w, describe(P, t));
}

static char *tok_text(Parser *P, const Token *t)
{
    return arena_strndup(&P->tmp, t->loc, t->len);
}

/* ---- numbers --------------------------------------------------------- */

/* Converts a NUM token (negated if neg) to an int64. */
static bool num_int(Parser *P, const Token *t, bool neg, int64_t *out)
{
    char buf[48];
    if (t->kind != TK_NUM)
        return error_at(P, t, "expected an integer, got %s", describe(P, t));
    if (t->len > 40)
        return error_at(P, t, "integer out of range");
    snprintf(buf, sizeof buf, "%s%.*s", neg ? "-" : "", (int)t->len, t->loc);
    for (size_t i = neg; buf[i]; i++)
        if (!isdigit((unsigned char)buf[i]))
            return error_at(P, t, "expected an integer, got %s", describe(P, t));
    errno = 0;
    char *endp;
    long long v = strtoll(buf, &endp, 10);
    if (errno == ERANGE || *endp)
        return error_at(P, t, "integer out of range");
    *out = v;
    return true;
}

/* int := '-'? NUM */
static bool parse_int(Parser *P, int64_t *out)
{
    bool neg = consume(P, "-");
    Token *t = peek(P);
    if (!num_int(P, t, neg, out))
        return false;
    P->pos++;
    return true;
}

/* float := '-'? (NUM | 'inf' | 'nan')
 * Converted as float (strtof) when single, else as double: each dtype reads
 * its own shortest printed form back exactly. */
static bool parse_float(Parser *P, bool single, double *out)
{
    bool neg = consume(P, "-");
    Token *t = peek(P);
    if (tok_is(t, TK_IDENT, "inf") || tok_is(t, TK_IDENT, "nan")) {
        P->pos++;
        *out = t->loc[0] == 'i' ? INFINITY : NAN;
        *out = neg ? -*out : *out;
        if (isnan(*out))
            *out = copysign(NAN, neg ? -1.0 : 1.0);
        return true;
    }
    if (t->kind != TK_NUM)
        return error_at(P, t, "expected a number, got %s", describe(P, t));
    if (t->len > 400)
        return error_at(P, t, "number too long");
    char buf[410], *endp;
    snprintf(buf, sizeof buf, "%s%.*s", neg ? "-" : "", (int)t->len, t->loc);
    if (strchr(buf, 'x') || strchr(buf, 'X'))
        return error_at(P, t, "bad number %s", describe(P, t));
    errno = 0;
    if (single)
        *out = strtof(buf, &endp);
    else
        *out = strtod(buf, &endp);
    if (*endp)
        return error_at(P, t, "bad number %s", describe(P, t));
    if (errno == ERANGE && isinf(*out))
        return error_at(P, t, "number out of range");
    P->pos++;
    return true;
}

static bool tok_is_float_text(const Token *t)
{
    for (size_t i = 0; i < t->len; i++)
        if (t->loc[i] == '.' || t->loc[i] == 'e' || t->loc[i] == 'E')
            return true;
    return false;
}

/* Rounds a double to a binary float with ebits exponent and mbits mantissa
 * bits (f16: 5, 10; bf16: 8, 7), to nearest even. Returns the bits. */
static uint16_t f64_to_small(double x, int ebits, int mbits)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 63) << (ebits + mbits));
    int e = (int)((b >> 52) & 0x7ff);
    uint64_t m = b & ((1ull << 52) - 1);
    uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    if (e == 0x7ff)
        return sign | inf | (m ? (uint16_t)(1u << (mbits - 1)) : 0);
    if (e == 0)
        return sign; /* double subnormals are far below any small subnormal */
    int bias = (1 << (ebits - 1)) - 1, E = e - 1023;
    if (E > bias)
        return sign | inf;
    uint64_t sig = m | (1ull << 52);
    int shift;
    int exp;
    if (E >= 1 - bias) {
        shift = 52 - mbits;
        exp = E + bias;
    } else {
        /* subnormal: units of 2^(1 - bias - mbits) */
        shift = 52 - mbits + (1 - bias - E);
        exp = 0;
        if (shift > 60)
            return sign;
    }
    uint64_t q = sig >> shift, r = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (r > half || (r == half && (q & 1)))
        q++;
    if (exp == 0)
        return sign | (uint16_t)q; /* a carry into 1 << mbits is the smallest normal */
    if (q == (2ull << mbits)) {
        q >>= 1;
        exp++;
    }
    if (exp >= (1 << ebits) - 1)
        return sign | inf;
    return sign | (uint16_t)((uint64_t)exp << mbits) | (uint16_t)(q & ((1ull << mbits) - 1));
}

/* ---- values ---------------------------------------------------------- */

static uint64_t hash_key(char ns, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ (unsigned char)ns;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static Entry *tab_slot(Entry *tab, size_t cap, char ns, const char *s, size_t n)
{
    size_t i = hash_key(ns, s, n) & (cap - 1);
    while (tab[i].key && !(tab[i].ns == ns && tab[i].klen == n && memcmp(tab[i].key, s, n) == 0))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static bool tab_grow(Parser *P)
{
    size_t cap = P->tabcap ? 2 * P->tabcap : 64;
    Entry *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < P->tabcap; i++)
        if (P->tab[i].key)
            *tab_slot(t, cap, P->tab[i].ns, P->tab[i].key, P->tab[i].klen) = P->tab[i];
    free(P->tab);
    P->tab = t;
    P->tabcap = cap;
    return true;
}

/* The namespace of a value token: unquoted all-digit names are unnamed. */
static char val_ns(const Token *t)
{
    if (t->quoted)
        return 'n';
    for (size_t i = 0; i < t->slen; i++)
        if (!isdigit((unsigned char)t->str[i]))
            return 'n';
    return 'u';
}

static Value *lookup(Parser *P, const Token *t)
{
    if (!P->tabcap)
        return NULL;
    return tab_slot(P->tab, P->tabcap, val_ns(t), t->str, t->slen)->v;
}

/* Binds the name of token t to v, and names v (NULL if unnamed). */
static bool define(Parser *P, const Token *t, Value *v)
{
    if ((P->tabn + 1) * 10 > P->tabcap * 7 && !tab_grow(P))
        return oom(P, t);
    char ns = val_ns(t);
    Entry *e = tab_slot(P->tab, P->tabcap, ns, t->str, t->slen);
    if (e->key)
        return error_at(P, t, "redefinition of value %.*s", (int)t->len, t->loc);
    e->key = t->str;
    e->klen = t->slen;
    e->ns = ns;
    e->v = v;
    P->tabn++;
    v->name = NULL;
    if (ns == 'n' && !(v->name = arena_strndup(&P->g->arena, t->str, t->slen)))
        return oom(P, t);
    return true;
}

/* value := VALUE, naming a defined value */
static Value *parse_use(Parser *P)
{
    Token *t = peek(P);
    if (t->kind != TK_VAL) {
        error_at(P, t, "expected a value, got %s", describe(P, t));
        return NULL;
    }
    Value *v = lookup(P, t);
    if (!v) {
        error_at(P, t, "undefined value %.*s", (int)t->len, t->loc);
        return NULL;
    }
    P->pos++;
    return v;
}

/* ---- dims and types -------------------------------------------------- */

static Dim *parse_dim_depth(Parser *P, int depth);

static Dim *dim_ok(Parser *P, const Token *t, Dim *d)
{
    if (!d)
        error_at(P, t, "bad dim expression: integer overflow");
    return d;
}

/* factor := INT | NAME | '-' factor | '(' dim ')' | fn '(' dim ',' dim ')'
 * fn     := 'floordiv' | 'ceildiv' | 'mod' | 'min' | 'max' */
static Dim *parse_factor(Parser *P, int depth)
{
    DimCtx *cx = &P->g->dims;
    Token *t = peek(P);
    if (depth > MAX_DEPTH) {
        error_at(P, t, "bad dim expression: nested too deeply");
        return NULL;
    }
    if (t->kind == TK_NUM) {
        int64_t v;
        if (tok_is_float_text(t) || !num_int(P, t, false, &v)) {
            error_at(P, t, "bad dim expression: expected an integer, got %s", describe(P, t));
            return NULL;
        }
        P->pos++;
        return dim_ok(P, t, dim_const(cx, v));
    }
    if (tok_is(t, TK_PUNCT, "-")) {
        P->pos++;
        Token *n = peek(P);
        if (n->kind == TK_NUM) { /* so that INT64_MIN can be written */
            int64_t v;
            if (!num_int(P, n, true, &v))
                return NULL;
            P->pos++;
            return dim_ok(P, n, dim_const(cx, v));
        }
        Dim *a = parse_factor(P, depth + 1);
        return a ? dim_ok(P, t, dim_neg(cx, a)) : NULL;
    }
    if (tok_is(t, TK_PUNCT, "(")) {
        P->pos++;
        Dim *a = parse_dim_depth(P, depth + 1);
        if (!a || !expect(P, ")"))
            return NULL;
        return a;
    }
    if (t->kind == TK_IDENT) {
        static const char *fns[] = {"floordiv", "ceildiv", "mod", "min", "max"};
        if (tok_is(peek_at(P, 1), TK_PUNCT, "(")) {
            int fn = -1;
            for (int i = 0; i < 5; i++)
                if (tok_is(t, TK_IDENT, fns[i]))
                    fn = i;
            if (fn < 0) {
                error_at(P, t, "bad dim expression: unknown function %s", describe(P, t));
                return NULL;
            }
            P->pos += 2;
            Dim *a = parse_dim_depth(P, depth + 1);
            if (!a || !expect(P, ","))
                return NULL;
            Token *bt = peek(P);
            Dim *b = parse_dim_depth(P, depth + 1);
            if (!b || !expect(P, ")"))
                return NULL;
            if (fn <= 2 && dim_is(b, 0)) {
                error_at(P, bt, "bad dim expression: division by zero");
                return NULL;
            }
            switch (fn) {
            case 0: return dim_ok(P, t, dim_floordiv(cx, a, b));
            case 1: return dim_ok(P, t, dim_ceildiv(cx, a, b));
            case 2: return dim_ok(P, t, dim_mod(cx, a, b));
            case 3: return dim_ok(P, t, dim_min(cx, a, b));
            default: return dim_ok(P, t, dim_max(cx, a, b));
            }
        }
        P->pos++;
        char *name = tok_text(P, t);
        if (!name) {
            oom(P, t);
            return NULL;
        }
        Dim *s = dim_sym(cx, name);
        if (!s)
            oom(P, t);
        return s;
    }
    error_at(P, t, "bad dim expression: expected a dim, got %s", describe(P, t));
    return NULL;
}

/* term := factor ('*' factor)* */
static Dim *parse_term(Parser *P, int depth)
{
    Dim *a = parse_factor(P, depth);
    while (a && is(P, "*")) {
        Token *op = next(P);
        Dim *b = parse_factor(P, depth);
        a = b ? dim_ok(P, op, dim_mul(&P->g->dims, a, b)) : NULL;
    }
    return a;
}

/* dim := term (('+' | '-') term)* */
static Dim *parse_dim_depth(Parser *P, int depth)
{
    Dim *a = parse_term(P, depth);
    while (a && (is(P, "+") || is(P, "-"))) {
        Token *op = next(P);
        Dim *b = parse_term(P, depth);
        if (!b)
            return NULL;
        a = dim_ok(P, op, op->loc[0] == '+' ? dim_add(&P->g->dims, a, b)
                                             : dim_sub(&P->g->dims, a, b));
    }
    return a;
}

static Dim *parse_dim(Parser *P) { return parse_dim_depth(P, 0); }

/* dims := '[' [dim (',' dim)*] ']'
 * The list is allocated in the graph arena. */
static bool parse_dims(Parser *P, Dim ***out, int *n, int max)
{
    Dim *buf[MAX_RANK + 1];
    Dim **v = buf;
    int cap = MAX_RANK + 1, k = 0;
    if (!expect(P, "["))
        return false;
    if (!is(P, "]")) {
        do {
            Token *t = peek(P);
            Dim *d = parse_dim(P);
            if (!d)
                return false;
            if (max && k == max)
                return error_at(P, t, "more than %d dims", max);
            if (k == cap) {
                Dim **nv = arena_array(&P->tmp, (size_t)cap * 2, sizeof *nv);
                if (!nv)
                    return oom(P, t);
                memcpy(nv, v, (size_t)k * sizeof *nv);
                v = nv;
                cap *= 2;
            }
            v[k++] = d;
        } while (consume(P, ","));
    }
    if (!expect(P, "]"))
        return false;
    *out = NULL;
    if (k) {
        *out = arena_array(&P->g->arena, (size_t)k, sizeof **out);
        if (!*out)
            return oom(P, peek(P));
        memcpy(*out, v, (size_t)k * sizeof **out);
    }
    *n = k;
    return true;
}

/* type := DTYPE '[' [dim (',' dim)*] ']'
 * DTYPE := 'f32' | 'f16' | 'bf16' | 'f64' | 'i8' | 'u8' | 'i32' | 'i64' | 'bool' */
static bool parse_type(Parser *P, Type *ty)
{
    Token *t = peek(P);
    if (t->kind != TK_IDENT)
        return error_at(P, t, "expected a type, got %s", describe(P, t));
    DType dt = dtype_from_name(t->loc, t->len);
    if (dt == DT_INVALID)
        return error_at(P, t, "unknown dtype %s", describe(P, t));
    P->pos++;
    ty->dtype = dt;
    return parse_dims(P, &ty->dims, &ty->rank, MAX_RANK);
}

/* ---- attributes ------------------------------------------------------ */

static bool enum_has(const char *enums, const char *w, size_t n)
{
    for (const char *p = enums; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, w, n) == 0)
            return true;
        p += len + (bar != NULL);
    }
    return false;
}

static const char *kind_words(AttrKind k)
{
    switch (k) {
    case ATTR_INT: return "an integer";
    case ATTR_FLOAT: return "a float";
    case ATTR_STR: return "a string";
    case ATTR_INTS: return "a list of integers";
    case ATTR_FLOATS: return "a list of floats";
    case ATTR_DIMS: return "a list of dims";
    case ATTR_DTYPE: return "a dtype";
    }
    return "?";
}

/* Checks that the next token can start a value of the spec's kind (not an
 * enum), so that a wrong kind gets one clear message. */
static bool attr_kind_ok(Parser *P, const AttrSpec *sp, const char *opname)
{
    Token *t = peek(P), *t1 = peek_at(P, 1);
    bool minus = tok_is(t, TK_PUNCT, "-");
    const Token *n = minus ? t1 : t;
    bool ok;
    switch (sp->kind) {
    case ATTR_INT:
        ok = n->kind == TK_NUM && !tok_is_float_text(n);
        break;
    case ATTR_FLOAT:
        ok = n->kind == TK_NUM || tok_is(n, TK_IDENT, "inf") || tok_is(n, TK_IDENT, "nan");
        break;
    case ATTR_STR:
        ok = sp->enums ? t->kind == TK_IDENT : t->kind == TK_STR;
        break;
    case ATTR_DTYPE:
        ok = t->kind == TK_IDENT;
        break;
    default:
        ok = tok_is(t, TK_PUNCT, "[");
        break;
    }
    if (ok)
        return true;
    return error_at(P, t, "attribute '%s' of op '%s' expects %s, got %s", sp->name, opname,
                    kind_words(sp->kind), describe(P, t));
}

/* attrval := int | float | STRING | WORD | '[' [item (',' item)*] ']'
 * The kind comes from the op's schema. */
static bool parse_attr_value(Parser *P, const AttrSpec *sp, const char *opname, Attr *a)
{
    Token *t = peek(P);
    if (sp->enums && t->kind != TK_IDENT)
        return error_at(P, t, "attribute '%s' of op '%s' expects one of %s, got %s", sp->name,
                        opname, sp->enums, describe(P, t));
    if (!sp->enums && !attr_kind_ok(P, sp, opname))
        return false;
    a->name = sp->name;
    a->kind = sp->kind;
    Arena *ga = &P->g->arena;
    switch (sp->kind) {
    case ATTR_INT:
        return parse_int(P, &a->i);
    case ATTR_FLOAT:
        return parse_float(P, false, &a->f);
    case ATTR_STR:
        if (sp->enums) {
            if (!enum_has(sp->enums, t->loc, t->len))
                return error_at(P, t, "'%.*s' is not allowed for attribute '%s' of op '%s' (one of %s)",
                                (int)t->len, t->loc, sp->name, opname, sp->enums);
            a->s = arena_strndup(ga, t->loc, t->len);
        } else {
            a->s = arena_strndup(ga, t->str, t->slen);
        }
        P->pos++;
        return a->s ? true : oom(P, t);
    case ATTR_DTYPE:
        a->dt = dtype_from_name(t->loc, t->len);
        if (a->dt == DT_INVALID)
            return error_at(P, t, "unknown dtype %s", describe(P, t));
        P->pos++;
        return true;
    case ATTR_DIMS:
        return parse_dims(P, &a->dims, &a->n, 0);
    case ATTR_INTS:
    case ATTR_FLOATS: {
        bool ints = sp->kind == ATTR_INTS;
        size_t esz = ints ? sizeof(int64_t) : sizeof(double);
        int cap = 8, n = 0;
        char *v = arena_array(&P->tmp, (size_t)cap, esz);
        if (!v || !expect(P, "["))
            return v ? false : oom(P, t);
        if (!is(P, "]")) {
            do {
                Token *e = peek(P);
                if (n == cap) {
                    char *nv = cap < (1 << 28) ? arena_array(&P->tmp, (size_t)cap * 2, esz) : NULL;
                    if (!nv)
                        return oom(P, e);
                    memcpy(nv, v, (size_t)n * esz);
                    v = nv;
                    cap *= 2;
                }
                if (ints) {
                    Token *num = tok_is(e, TK_PUNCT, "-") ? peek_at(P, 1) : e;
                    if (num->kind == TK_NUM && tok_is_float_text(num))
                        return error_at(P, num, "attribute '%s' of op '%s' expects %s, got %s",
                                        sp->name, opname, kind_words(sp->kind), describe(P, num));
                    if (!parse_int(P, (int64_t *)(void *)(v + (size_t)n * esz)))
                        return false;
                } else if (!parse_float(P, false, (double *)(void *)(v + (size_t)n * esz))) {
                    return false;
                }
                n++;
            } while (consume(P, ","));
        }
        if (!expect(P, "]"))
            return false;
        a->n = n;
        if (n) {
            void *dst = arena_array(ga, (size_t)n, esz);
            if (!dst)
                return oom(P, t);
            memcpy(dst, v, (size_t)n * esz);
            if (ints)
                a->ints = dst;
            else
                a->floats = dst;
        }
        return true;
    }
    }
    return false;
}

/* attrs := '{' [NAME '=' attrval (',' NAME '=' attrval)*] '}'
 * Fills out[] in schema order; each schema entry at most once. */
static bool parse_attrs(Parser *P, OpKind k, Attr *slots, bool *have)
{
    const OpInfo *info = op_info(k);
    if (!expect(P, "{"))
        return false;
    if (consume(P, "}"))
        return true;
    do {
        Token *t = peek(P);
        if (t->kind != TK_IDENT)
            return error_at(P, t, "expected an attribute name, got %s", describe(P, t));
        char *name = tok_text(P, t);
        if (!name)
            return oom(P, t);
        const AttrSpec *sp = op_attr_spec(k, name);
        if (!sp)
            return error_at(P, t, "unknown attribute '%s' for op '%s'", name, info->name);
        int i = (int)(sp - info->attrs);
        if (have[i])
            return error_at(P, t, "duplicate attribute '%s'", name);
        P->pos++;
        if (!expect(P, "=") || !parse_attr_value(P, sp, info->name, &slots[i]))
            return false;
        have[i] = true;
    } while (consume(P, ","));
    return expect(P, "}");
}

/* ---- constants ------------------------------------------------------- */

typedef struct Mapping {
    void *addr;
    size_t len;
} Mapping;

static void unmap(void *p)
{
    Mapping *m = p;
    munmap(m->addr, m->len);
    free(m);
}

/* Maps nbytes at offset of the file named by token t (relative to the IR
 * file's directory), kept alive by the graph. */
static bool load_file(Parser *P, const Token *t, const char *path, int64_t offset,
                      size_t nbytes, Const *c)
{
    const char *full = path[0] == '/' || !P->dir[0] ? path : arena_printf(&P->tmp, "%s/%s", P->dir, path);
    if (!full)
        return oom(P, t);
    int fd = open(full, O_RDONLY);
    if (fd < 0)
        return error_at(P, t, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    size_t endoff;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return error_at(P, t, "'%s' is not a regular file", path);
    }
    if (!size_add((size_t)offset, nbytes, &endoff) || (uint64_t)st.st_size < endoff) {
        close(fd);
        return error_at(P, t, "'%s' is too short: the constant needs %zu bytes at offset %lld, "
                        "the file has %lld bytes", path, nbytes, (long long)offset,
                        (long long)st.st_size);
    }
    if (nbytes == 0) {
        close(fd);
        c->data = arena_alloc(&P->g->arena, 1);
        return c->data ? true : oom(P, t);
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t base = (size_t)offset - (size_t)offset % (size_t)(page > 0 ? page : 4096);
    size_t len = endoff - base;
    Mapping *m = malloc(sizeof *m);
    void *addr = m ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)base) : MAP_FAILED;
    close(fd);
    if (addr == MAP_FAILED) {
        free(m);
        if (!m)
            return oom(P, t);
        return error_at(P, t, "cannot map '%s': %s", path, strerror(errno));
    }
    m->addr = addr;
    m->len = len;
    if (!graph_keep(P->g, m, unmap)) {
        unmap(m);
        return oom(P, t);
    }
    c->data = (char *)addr + ((size_t)offset - base);
    return true;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* element := int | float | 'true' | 'false', stored as element i of dt */
static bool parse_elem(Parser *P, DType dt, char *buf, size_t i)
{
    Token *t = peek(P);
    size_t sz = dtype_size(dt);
    char *dst = buf + i * sz;
    if (dt == DT_BOOL) {
        int8_t b;
        if (tok_is(t, TK_IDENT, "true") || tok_is(t, TK_NUM, "1"))
            b = 1;
        else if (tok_is(t, TK_IDENT, "false") || tok_is(t, TK_NUM, "0"))
            b = 0;
        else
            return error_at(P, t, "expected true or false, got %s", describe(P, t));
        P->pos++;
        *dst = b;
        return true;
    }
    if (dtype_is_float(dt)) {
        double v;
        if (!parse_float(P, dt == DT_F32, &v))
            return false;
        if (dt == DT_F64) {
            memcpy(dst, &v, 8);
        } else if (dt == DT_F32) {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            if (isnan(v)) /* the canonical quiet NaN, with the sign */
                bits = (signbit(v) ? 0x80000000u : 0) | 0x7fc00000u;
            memcpy(dst, &bits, 4);
        } else {
            uint16_t h = dt == DT_F16 ? f64_to_small(v, 5, 10) : f64_to_small(v, 8, 7);
            uint16_t inf = dt == DT_F16 ? 0x7c00 : 0x7f80;
            if (isfinite(v) && (h & 0x7fff) == inf)
                return error_at(P, t, "number out of range for %s", dtype_name(dt));
            memcpy(dst, &h, 2);
        }
        return true;
    }
    Token *num = tok_is(t, TK_PUNCT, "-") ? peek_at(P, 1) : t;
    if (num->kind == TK_NUM && tok_is_float_text(num))
        return error_at(P, num, "expected an integer for %s, got %s", dtype_name(dt), describe(P, num));
    if (dt == DT_U64 && num == t && num->kind == TK_NUM && num->len <= 40) { /* up to 2^64 - 1 */
        char text[48];
        snprintf(text, sizeof text, "%.*s", (int)num->len, num->loc);
        errno = 0;
        char *endp;
        unsigned long long u = strtoull(text, &endp, 10);
        if (errno != ERANGE && !*endp && isdigit((unsigned char)text[0])) {
            uint64_t w = u;
            P->pos++;
            memcpy(dst, &w, 8);
            return true;
        }
        return error_at(P, num, "%s out of range for u64", text);
    }
    int64_t v;
    if (!parse_int(P, &v))
        return false;
    switch (dt) {
    case DT_I8:
        if (v < INT8_MIN || v > INT8_MAX)
            return error_at(P, num, "%lld out of range for i8", (long long)v);
        *(int8_t *)dst = (int8_t)v;
        break;
    case DT_U8:
        if (v < 0 || v > UINT8_MAX)
            return error_at(P, num, "%lld out of range for u8", (long long)v);
        *(uint8_t *)dst = (uint8_t)v;
        break;
    case DT_I16: {
        if (v < INT16_MIN || v > INT16_MAX)
            return error_at(P, num, "%lld out of range for i16", (long long)v);
        int16_t w = (int16_t)v;
        memcpy(dst, &w, 2);
        break;
    }
    case DT_U16: {
        if (v < 0 || v > UINT16_MAX)
            return error_at(P, num, "%lld out of range for u16", (long long)v);
        uint16_t w = (uint16_t)v;
        memcpy(dst, &w, 2);
        break;
    }
    case DT_I32: {
        if (v < INT32_MIN || v > INT32_MAX)
            return error_at(P, num, "%lld out of range for i32", (long long)v);
        int32_t w = (int32_t)v;
        memcpy(dst, &w, 4);
        break;
    }
    case DT_U32: {
        if (v < 0 || v > UINT32_MAX)
            return error_at(P, num, "%lld out of range for u32", (long long)v);
        uint32_t w = (uint32_t)v;
        memcpy(dst, &w, 4);
        break;
    }
    case DT_U64:
        if (v < 0)
            return error_at(P, num, "%lld out of range for u64", (long long)v);
        memcpy(dst, &v, 8);
        break;
    default:
        memcpy(dst, &v, 8);
        break;
    }
    return true;
}

/* payload := 'dense' '<' (element | '[' [element (',' element)*] ']' | STRING) '>'
 *          | 'file' '<' STRING ',' INT '>'
 *          | 'elided'
 * Called with the result type known; tt is the type's token for messages. */
static bool parse_payload(Parser *P, const Type *ty, const Token *tt, Const *c)
{
    size_t n, nbytes;
    if (!type_static_numel(ty, &n))
        return error_at(P, tt, "a constant needs a type with constant dims");
    if (!size_mul(n, dtype_size(ty->dtype), &nbytes))
        return error_at(P, tt, "constant too large");
    Token *t = peek(P);
    if (is_word(P, "elided")) {
        P->pos++;
        c->src = CONST_ELIDED;
        return true;
    }
    if (is_word(P, "file")) {
        P->pos++;
        if (!expect(P, "<"))
            return false;
        Token *pt = peek(P);
        if (pt->kind != TK_STR)
            return error_at(P, pt, "expected a file name string, got %s", describe(P, pt));
        P->pos++;
        int64_t off;
        if (!expect(P, ",") || !parse_int(P, &off) || !expect(P, ">"))
            return false;
        if (off < 0)
            return error_at(P, pt, "negative file offset");
        c->src = CONST_FILE;
        c->path = arena_strndup(&P->g->arena, pt->str, pt->slen);
        c->offset = off;
        c->nbytes = nbytes;
        return c->path ? load_file(P, pt, pt->str, off, nbytes, c) : oom(P, pt);
    }
    if (!expect_word(P, "dense") || !expect(P, "<"))
        return false;
    c->src = CONST_INLINE;
    c->nbytes = nbytes;
    Token *s = peek(P);
    /* the data's length is checked against the type before the type's
     * bytes are allocated: a few bytes of text must not make disc take
     * gigabytes (fuzz_ir: f16[2, 478730504, 5] with two elements) */
    if (s->kind == TK_STR) {
        if (s->slen < 2 || s->str[0] != '0' || (s->str[1] != 'x' && s->str[1] != 'X'))
            return error_at(P, s, "a hex constant starts with \"0x\"");
        size_t digits = s->slen - 2;
        for (size_t i = 0; i < digits; i++)
            if (hexval((unsigned char)s->str[2 + i]) < 0)
                return error_at(P, s, "bad hex digit '%c' in constant", s->str[2 + i]);
        if (digits % 2)
            return error_at(P, s, "odd number of hex digits in constant");
        if (digits / 2 != nbytes)
            return error_at(P, s, "constant has %zu bytes, its type needs %zu", digits / 2, nbytes);
    } else if (is(P, "[")) {
        /* elements: the commas before the ']', plus one; the messages
         * point where parsing them would stop */
        size_t k = !tok_is(peek_at(P, 1), TK_PUNCT, "]");
        Token *u, *extra = NULL;
        for (int i = 1;; i++) {
            u = peek_at(P, i);
            if (u->kind == TK_EOF || tok_is(u, TK_PUNCT, ">") || tok_is(u, TK_PUNCT, "]"))
                break;
            if (tok_is(u, TK_PUNCT, ",") && ++k == n + 1)
                extra = peek_at(P, i + 1);
        }
        if (k > n)
            return error_at(P, extra ? extra : u, "constant has more than the %zu elements its type holds", n);
        if (k < n)
            return error_at(P, u, "constant has %zu elements, its type needs %zu", k, n);
    }
    char *buf = arena_alloc(&P->g->arena, nbytes ? nbytes : 1);
    if (!buf)
        return error_at(P, t, "constant too large (out of memory)");
    c->data = buf;
    if (s->kind == TK_STR) {
        for (size_t i = 0; i < nbytes; i++)
            buf[i] = (char)(hexval((unsigned char)s->str[2 + 2 * i]) * 16 +
                            hexval((unsigned char)s->str[3 + 2 * i]));
        P->pos++;
    } else if (consume(P, "[")) {
        size_t k = 0;
        if (!is(P, "]")) {
            do {
                Token *e = peek(P);
                if (k == n)
                    return error_at(P, e, "constant has more than the %zu elements its type holds", n);
                if (!parse_elem(P, ty->dtype, buf, k++))
                    return false;
            } while (consume(P, ","));
        }
        if (k != n)
            return error_at(P, peek(P), "constant has %zu elements, its type needs %zu", k, n);
        if (!expect(P, "]"))
            return false;
    } else {
        size_t sz = dtype_size(ty->dtype);
        char one[8];
        if (!parse_elem(P, ty->dtype, one, 0))
            return false;
        for (size_t i = 0; i < n; i++)
            memcpy(buf + i * sz, one, sz);
    }
    return expect(P, ">");
}

/* Skips a payload up to its closing '>' (or 'elided'), checking only its
 * outline; parse_payload reads it once the type is known. */
static bool skip_payload(Parser *P)
{
    Token *t = peek(P);
    if (is_word(P, "elided")) {
        P->pos++;
        return true;
    }
    if (!is_word(P, "dense") && !is_word(P, "file"))
        return error_at(P, t, "expected a constant payload ('dense', 'file' or 'elided'), got %s",
                        describe(P, t));
    P->pos++;
    if (!expect(P, "<"))
        return false;
    for (;;) {
        Token *u = peek(P);
        if (u->kind == TK_EOF)
            return error_at(P, u, "expected '>', got end of file");
        if (tok_is(u, TK_PUNCT, ":") || tok_is(u, TK_PUNCT, "="))
            return error_at(P, u, "expected '>', got %s", describe(P, u));
        P->pos++;
        if (tok_is(u, TK_PUNCT, ">"))
            return true;
    }
}

/* ---- statements and the graph ---------------------------------------- */

/* A growable array of tokens or values in the scratch arena. */
typedef struct Vec {
    void **v;
    int n, cap;
} Vec;

static bool vec_push(Parser *P, Vec *a, void *p)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 8;
        void **nv = arena_array(&P->tmp, (size_t)cap, sizeof *nv);
        if (!nv)
            return false;
        if (a->n)
            memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = p;
    return true;
}

static Token *save_tok(Parser *P, const Token *t)
{
    Token *c = arena_alloc(&P->tmp, sizeof *c);
    if (c)
        *c = *t;
    return c;
}

static bool parse_graph(Parser *P);
static bool parse_sym(Parser *P);
static void free_region(void *g) { graph_free(g); }

/* region := 'region' '{' symdecl* graph '}'
 * A region is a graph of its own: its symbols and value names are its own,
 * and it sees nothing of the enclosing graph. It is kept by the enclosing
 * graph (freed with it) from here on. */
static Graph *parse_region(Parser *P)
{
    Token *t = peek(P);
    if (P->depth >= MAX_REGION_DEPTH) {
        error_at(P, t, "regions nested too deeply (more than %d)", MAX_REGION_DEPTH);
        return NULL;
    }
    P->pos++;
    if (!expect(P, "{"))
        return NULL;
    Graph *outer = P->g;
    Entry *tab = P->tab;
    size_t tabcap = P->tabcap, tabn = P->tabn;
    Graph *r = graph_new(NULL);
    if (!r || !graph_keep(outer, r, free_region)) {
        graph_free(r);
        oom(P, t);
        return NULL;
    }
    r->file = outer->file;
    P->g = r;
    P->tab = NULL;
    P->tabcap = P->tabn = 0;
    P->depth++;
    bool ok = true;
    while (ok && is_word(P, "sym"))
        ok = parse_sym(P);
    ok = ok && parse_graph(P) && expect(P, "}");
    P->depth--;
    free(P->tab);
    P->g = outer;
    P->tab = tab;
    P->tabcap = tabcap;
    P->tabn = tabn;
    return ok ? r : NULL;
}

/* stmt := VALUE (',' VALUE)* '=' OPNAME ['(' [value (',' value)*] ')'] [attrs]
 *         [payload] region* ':' type (',' type)*
 * The payload is required for, and only allowed on, 'const'. */
static bool parse_stmt(Parser *P)
{
    Token *first = peek(P);
    int line = first->line;
    Vec names = {0}, ins = {0};
    do {
        Token *t = peek(P);
        if (t->kind != TK_VAL)
            return error_at(P, t, "expected a value name, got %s", describe(P, t));
        Token *c = save_tok(P, t);
        if (!c || !vec_push(P, &names, c))
            return oom(P, t);
        P->pos++;
    } while (consume(P, ","));
    if (!expect(P, "="))
        return false;

    Token *opt = save_tok(P, peek(P));
    if (!opt)
        return oom(P, peek(P));
    if (opt->kind != TK_IDENT)
        return error_at(P, opt, "expected an op name, got %s", describe(P, opt));
    OpKind k = op_kind_from_name(opt->loc, opt->len);
    if (k == OP_COUNT)
        return error_at(P, opt, "unknown op '%.*s'", (int)opt->len, opt->loc);
    const OpInfo *info = op_info(k);
    P->pos++;
    if (info->nout != VARIADIC && names.n != info->nout)
        return error_at(P, opt, "op '%s' has %d result%s, but %d name%s given", info->name,
                        info->nout, info->nout == 1 ? "" : "s", names.n, names.n == 1 ? " is" : "s are");

    if (consume(P, "(") && !consume(P, ")")) {
        do {
            Value *v = parse_use(P);
            if (!v)
                return false;
            if (!vec_push(P, &ins, v))
                return oom(P, opt);
        } while (consume(P, ","));
        if (!expect(P, ")"))
            return false;
    }
    if (info->nin != VARIADIC && ins.n != info->nin)
        return error_at(P, opt, "op '%s' takes %d operand%s, got %d", info->name, info->nin,
                        info->nin == 1 ? "" : "s", ins.n);

    Attr *slots = arena_array(&P->tmp, (size_t)(info->nattrs ? info->nattrs : 1), sizeof *slots);
    bool *have = arena_array(&P->tmp, (size_t)(info->nattrs ? info->nattrs : 1), sizeof *have);
    if (!slots || !have)
        return oom(P, opt);
    if (is(P, "{") && !parse_attrs(P, k, slots, have))
        return false;
    for (int i = 0; i < info->nattrs; i++)
        if (!have[i] && !info->attrs[i].optional)
            return error_at(P, opt, "op '%s' is missing required attribute '%s'", info->name,
                            info->attrs[i].name);

    int payload = -1;
    if (k == OP_CONST) {
        payload = P->pos;
        if (!skip_payload(P))
            return false;
    }

    Graph *regions[MAX_REGIONS];
    int nregions = 0;
    while (is_word(P, "region")) {
        if (nregions == MAX_REGIONS)
            return error_at(P, peek(P), "an op has at most %d regions", MAX_REGIONS);
        if (!(regions[nregions++] = parse_region(P)))
            return false;
    }

    if (!expect(P, ":"))
        return false;
    Type *types = arena_array(&P->tmp, (size_t)names.n, sizeof *types);
    Token *tt = save_tok(P, peek(P));
    if (!types || !tt)
        return oom(P, opt);
    int ntypes = 0;
    do {
        Type ty;
        Token *t = peek(P);
        if (!parse_type(P, &ty))
            return false;
        if (ntypes == names.n)
            return error_at(P, t, "more result types than the %d result name%s", names.n,
                            names.n == 1 ? "" : "s");
        types[ntypes++] = ty;
    } while (consume(P, ","));
    if (ntypes != names.n)
        return error_at(P, opt, "%d result name%s but %d type%s", names.n,
                        names.n == 1 ? "" : "s", ntypes, ntypes == 1 ? "" : "s");

    Op *op = graph_append_op(P->g, k, (Value *const *)ins.v, ins.n, types, names.n);
    if (!op)
        return oom(P, opt);
    op->line = line;
    if (nregions) { /* already kept by the graph (parse_region) */
        if (!(op->regions = arena_array(&P->g->arena, (size_t)nregions, sizeof *op->regions)))
            return oom(P, opt);
        memcpy(op->regions, regions, (size_t)nregions * sizeof *regions);
        op->nregions = nregions;
    }
    int nattrs = 0;
    for (int i = 0; i < info->nattrs; i++)
        nattrs += have[i];
    if (nattrs) {
        op->attrs = arena_array(&P->g->arena, (size_t)nattrs, sizeof *op->attrs);
        if (!op->attrs)
            return oom(P, opt);
        for (int i = 0; i < info->nattrs; i++)
            if (have[i])
                op->attrs[op->nattrs++] = slots[i];
    }
    for (int i = 0; i < names.n; i++)
        if (!define(P, names.v[i], op->out[i]))
            return false;

    if (payload >= 0) {
        op->cst = arena_alloc(&P->g->arena, sizeof *op->cst);
        if (!op->cst)
            return oom(P, opt);
        int after = P->pos;
        P->pos = payload;
        if (!parse_payload(P, &types[0], tt, op->cst))
            return false;
        P->pos = after;
    }
    return true;
}

/* param := VALUE ':' type */
static bool parse_param(Parser *P)
{
    Token *t = peek(P);
    if (t->kind != TK_VAL)
        return error_at(P, t, "expected a value name, got %s", describe(P, t));
    Token *c = save_tok(P, t);
    if (!c)
        return oom(P, t);
    P->pos++;
    Type ty;
    if (!expect(P, ":") || !parse_type(P, &ty))
        return false;
    Value *v = graph_add_input(P->g, NULL, ty);
    if (!v)
        return oom(P, c);
    return define(P, c, v);
}

/* graph := 'graph' GLOBAL '(' [param (',' param)*] ')' '{' stmt* 'return' [value (',' value)*] '}'
 * GLOBAL := '@' NAME | '@' STRING */
static bool parse_graph(Parser *P)
{
    if (!expect_word(P, "graph"))
        return false;
    Token *t = peek(P);
    if (t->kind != TK_AT)
        return error_at(P, t, "expected a graph name ('@name'), got %s", describe(P, t));
    if (!(P->g->name = arena_strndup(&P->g->arena, t->str, t->slen)))
        return oom(P, t);
    P->pos++;
    if (!expect(P, "("))
        return false;
    if (!consume(P, ")")) {
        do {
            if (!parse_param(P))
                return false;
        } while (consume(P, ","));
        if (!expect(P, ")"))
            return false;
    }
    if (!expect(P, "{"))
        return false;
    for (;;) {
        release(P);
        Token *s = peek(P);
        if (tok_is(s, TK_IDENT, "return"))
            break;
        if (s->kind != TK_VAL)
            return error_at(P, s, "expected a statement or 'return', got %s", describe(P, s));
        if (!parse_stmt(P))
            return false;
    }
    P->pos++;
    if (peek(P)->kind == TK_VAL) {
        do {
            Token *u = peek(P);
            Value *v = parse_use(P);
            if (!v)
                return false;
            if (!graph_add_output(P->g, v))
                return oom(P, u);
        } while (consume(P, ","));
    }
    return expect(P, "}");
}

/* symdecl := 'sym' NAME symprop*
 * symprop := '>=' int | '<=' int | 'input' | 'data' | 'user' | 'derived' */
static bool parse_sym(Parser *P)
{
    static const char *origins[] = {"input", "data", "user", "derived"};
    P->pos++;
    Token *t = peek(P);
    if (t->kind != TK_IDENT)
        return error_at(P, t, "expected a symbol name, got %s", describe(P, t));
    char *name = tok_text(P, t);
    if (!name)
        return oom(P, t);
    if (dim_sym_find(&P->g->dims, name))
        return error_at(P, t, "symbol '%s' declared twice", name);
    P->pos++;
    int64_t lo = 1, hi = DIM_INF;
    SymOrigin origin = SYM_INPUT;
    for (;;) {
        if (consume(P, ">=")) {
            if (!parse_int(P, &lo))
                return false;
            continue;
        }
        if (consume(P, "<=")) {
            if (!parse_int(P, &hi))
                return false;
            continue;
        }
        bool found = false;
        for (int i = 0; i < 4; i++)
            if (is_word(P, origins[i])) {
                origin = (SymOrigin)i;
                found = true;
            }
        if (!found)
            break;
        P->pos++;
    }
    if (lo > hi)
        return error_at(P, t, "symbol '%s' has empty bounds [%lld, %lld]", name, (long long)lo,
                        (long long)hi);
    Dim *s = dim_sym(&P->g->dims, name);
    if (!s)
        return oom(P, t);
    dim_sym_set(s, lo, hi, origin);
    return true;
}

/* module := symdecl* graph EOF */
static bool parse_module(Parser *P)
{
    while (is_word(P, "sym"))
        if (!parse_sym(P))
            return false;
    if (!parse_graph(P))
        return false;
    Token *t = peek(P);
    if (t->kind != TK_EOF)
        return error_at(P, t, "unexpected %s after the graph", describe(P, t));
    return !P->err;
}

Graph *graph_parse(const char *src, size_t len, const char *filename, Diag *d)
{
    Parser P = {0};
    P.src = P.cur = P.bol = src ? src : "";
    P.end = P.src + (src ? len : 0);
    P.line = 1;
    P.file = filename ? filename : "<input>";
    P.eof.kind = TK_EOF;
    arena_init(&P.tmp);
    const char *slash = filename ? strrchr(filename, '/') : NULL;
    P.dir = slash ? (slash == filename ? "/" : arena_strndup(&P.tmp, filename, (size_t)(slash - filename))) : "";
    P.g = graph_new(NULL);
    bool ok = P.g && P.dir;
    if (!ok)
        diag_setk(&P.diag, DIAG_RESOURCE, "%s: error: out of memory", P.file);
    if (ok && filename && !(P.g->file = arena_strdup(&P.g->arena, filename)))
        ok = oom_here(&P, P.src);
    if (ok)
        ok = parse_module(&P);
    free(P.toks);
    free(P.tab);
    arena_free(&P.tmp);
    if (!ok) {
        graph_free(P.g);
        diag_copy(d, &P.diag);
        return NULL;
    }
    return P.g;
}

Graph *graph_parse_file(const char *path, Diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag_setk(d, DIAG_RESOURCE, "%s: error: cannot open file: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        diag_setk(d, DIAG_RESOURCE, "%s: error: cannot read file%s", path, buf ? "" : ": out of memory");
        free(buf);
        return NULL;
    }
    Graph *g = graph_parse(buf, len, path, d);
    free(buf);
    return g;
}

Dim *dim_parse(Graph *g, const char *text, Diag *d)
{
    Parser P = {0};
    P.src = P.cur = P.bol = text;
    P.end = text + strlen(text);
    P.line = 1;
    P.file = "<dim>";
    P.dir = "";
    P.eof.kind = TK_EOF;
    P.g = g;
    arena_init(&P.tmp);
    Dim *r = parse_dim(&P);
    if (r && peek(&P)->kind != TK_EOF) {
        error_at(&P, peek(&P), "unexpected %s after the expression", describe(&P, peek(&P)));
        r = NULL;
    }
    free(P.toks);
    arena_free(&P.tmp);
    if (!r && d) {
        /* keep the first line only: "<dim>:1:5: error: ..." */
        char *nl = strchr(P.diag.msg, '\n');
        if (nl)
            *nl = 0;
        diag_copy(d, &P.diag);
    }
    return r;
}
