#!/usr/bin/env python3
"""Build minfer's tokenizer fixtures: four tiny trained tokenizers plus Hugging Face reference encodings.
(Over 650 lines: the four styles share one corpus, one case list and one set of HF cross-checks.)

What it is
    Trains small tokenizers (about 1000 tokens each) in the styles of four real checkpoint families, saves
    them in the files an HF checkpoint ships, and records what Hugging Face's own code makes of a set of
    test strings. The C++ tokenizer in io/ must reproduce "ids" and "decoded" exactly.

    Training text (deterministic, no downloads): tests/golden/tokenizer_corpus.txt three times, the
    escaped extra cases below (CRLF, NFC, ...), and seeded English-like filler sentences, so that real
    merges are learned.

How to run
    python3 -m venv /tmp/tokvenv
    /tmp/tokvenv/bin/pip install tokenizers sentencepiece transformers protobuf      # no torch needed
    /tmp/tokvenv/bin/python tests/golden/make_tokenizer_fixtures.py [OUTDIR]
    OUTDIR defaults to tests/fixtures/tokenizers (the committed copy). No GPU, no network, about 3 s.
    Re-running gives byte-identical files (checked by running it twice, also with another PYTHONHASHSEED, and
    diffing; SentencePiece trains with one thread, the tokenizers BPE trainer is deterministic as it is).

    The committed files were produced with Python 3.11.7 and
        tokenizers 0.23.3, sentencepiece 0.2.3, transformers 5.24.0, protobuf 7.36.2, huggingface_hub 2.4.0.
    Other versions print a warning; a different tokenizers/sentencepiece version may train different
    merges (the files change, the checks below still have to pass).

What it writes, in OUTDIR/<style>/
    gpt2/                  tokenizer.json: BPE, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
                           (the GPT-2 regex), ByteLevel decoder and post-processor, added special token
                           <|endoftext|> (id = last). Merges saved the way tokenizers >= 0.20 saves them:
                           pairs ["a", "b"].
    gpt2_merges_strings/   the same tokenizer with merges rewritten as the older "a b" strings (same vocab,
                           same cases.json), so both merge formats get tested.
    llama3/                BPE, pre_tokenizer Sequence[Split(Llama-3 regex, isolated), ByteLevel(use_regex=False)],
                           ByteLevel decoder, "ignore_merges": true (as Meta-Llama-3's tokenizer.json has: a
                           pre-token that is itself in the vocab is emitted whole, without running merges).
                           Two vocab entries no merge produces ("Ġtokenizer", "ĠcafÃ©", i.e. " tokenizer" and
                           " café", ids 1000 and 1001) make the cases depend on it. Post-processor
                           TemplateProcessing that prepends <|begin_of_text|>. Specials
                           <|begin_of_text|> <|end_of_text|> <|start_header_id|> <|end_header_id|> <|eot_id|>.
    qwen2/                 normalizer NFC, Split(Qwen2 regex, isolated) + ByteLevel(use_regex=False), ByteLevel
                           decoder, specials <|endoftext|> <|im_start|> <|im_end|>.
    llama2_sp/             tokenizer.model: SentencePiece BPE trained like Llama 2's (byte_fallback, dummy prefix,
                           split_digits, identity normalisation, extra whitespace kept, whitespace-only pieces,
                           <unk>=0 <s>=1 </s>=2, no pad, ids 3..258 are <0x00>..<0xFF>). No tokenizer.json.
    llama2_json/           the same vocabulary as tokenizer.json only, in the layout Llama-2 / TinyLlama ship it
                           (what transformers 4's LlamaConverter writes with legacy=True): BPE with
                           byte_fallback, fuse_unk, unk_token <unk>, merges generated from the piece scores;
                           normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no pre_tokenizer, decoder
                           Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)], post-processor
                           "<s> $A". Its cases.json / decode_cases.json are copies of llama2_sp's, checked to be
                           reproduced by the tokenizers library from this file.
    Each also has tokenizer_config.json and generation_config.json written the way HF checkpoints have them
    (transformers-4 style, with added_tokens_decoder; clean_up_tokenization_spaces is false everywhere, so
    transformers' decode equals the backend decode), plus:

    cases.json         a JSON list, one object per line: {"text", "ids", "decoded"} and optional fields
                         ids_with_specials  encode(text, add_special_tokens=True) (3 cases per style: BOS handling)
                         sp_ids             llama2_sp only: plain sentencepiece sp.encode(text), where it differs
                         sp_decoded         llama2_sp only: sentencepiece's sp.decode(ids), where it differs
                         transformers5_ids  llama2_sp only: what transformers 5's LlamaTokenizer (AutoTokenizer on
                                            this directory) gives, where it differs (see below)
                       Texts: every non-empty line of the corpus, multi-line chunks of it (the C++ and Python
                       blocks, the paragraphs with blank lines, the CRLF versions of those, the whole corpus),
                       the escaped EDGE_CASES below, and style-specific special-token cases (a lone special,
                       two adjacent ones, one inside a word, chat-formatted prompts, near misses).
    decode_cases.json  a JSON list of {"ids", "skip_special_tokens", "decoded"}: id sequences that are not the
                       encoding of any text (split or invalid UTF-8, specials skipped or kept).

References (what "ids"/"decoded" are)
    tokenizer.json styles: tokenizers.Tokenizer.from_file(...).encode(text, add_special_tokens=False).ids and
    .decode(ids, skip_special_tokens=False). Asserted equal to transformers'
    PreTrainedTokenizerFast(tokenizer_file=...) and to AutoTokenizer.from_pretrained(<fixture dir>) (which in
    transformers 5 rebuilds GPT2Tokenizer / Qwen2Tokenizer from the class definition: same result).
    ids_with_specials come from AutoTokenizer and are asserted equal to the tokenizer.json post-processor's.
    All of it also checked once by hand with transformers 4.57.6 / tokenizers 0.22.2: same ids and decodes.

    llama2_sp (and llama2_json): Hugging Face has three behaviours for Llama-2-style tokenizers, so the choice is
    spelled out.
      * "ids" = split the text on the special tokens <unk> <s> </s> (exact match; a special glued to a word is
        still split out), then sp.encode() every non-empty piece on its own: EVERY piece gets SentencePiece's
        dummy prefix "▁", also the piece right after a special token, and a piece that already starts with a
        space gets it too (" x" -> ["▁", "▁x"], "</s> x" -> ["</s>", "▁", "▁x"]). This is transformers'
        "legacy" behaviour. It is what the tokenizers library does with the tokenizer.json Llama-2 and TinyLlama
        ship (its normalizer Prepend("▁") + Replace(" ", "▁") runs on every piece between added tokens), hence
        what transformers 4's default (fast) tokenizer does for those checkpoints whatever their "legacy" says,
        and it is how Meta's reference code encodes chat turns (each segment separately, each with its own
        dummy prefix). Cross-checked by this script against transformers 5's
        SentencePieceBackend(vocab_file, legacy=True) and, for llama2_json, against tokenizers itself.
        Checked once by hand (not by this script) with transformers 4.57.6 / tokenizers 0.22.2 on the 169
        cases: LlamaTokenizer(legacy=True) (slow) and LlamaTokenizerFast.from_pretrained(<dir>) with legacy
        true give exactly "ids", and that fast tokenizer's decode gives exactly "decoded"; the tokenizer.json
        it saves has the same content (vocab, merges, normalizer, decoder, post-processor, added tokens) as
        llama2_json's. The fixtures' tokenizer_config.json therefore says "legacy": true.
      * The "legacy" flag: TinyLlama/TinyLlama-1.1B-Chat-v1.0's tokenizer_config.json says "legacy": false (and, as
        far as recalled, so does meta-llama/Llama-2-7b-hf's current one; not checked against the Hub). Neither
        sets add_prefix_space; the dummy prefix comes from tokenizer.model's normalizer_spec.add_dummy_prefix
        (true). What false changes: transformers 4's slow tokenizer then prepends "▁" only once, at the start
        of the text (and strips add_dummy_prefix from the model), so "abc</s>def" -> [.."</s>","d",..] instead
        of [.."</s>","▁d",..]: it differs from "ids" on 14 of the 169 cases, all with special tokens in the
        text. transformers 4's fast tokenizer built from tokenizer.model with legacy=false uses
        Metaspace(prepend_scheme="first") instead and differs on 38 (also every text that starts with a space).
      * transformers 5 has no slow Llama tokenizer. AutoTokenizer gives a tokenizers-backed LlamaTokenizer
        rebuilt from the vocab and merges with Metaspace(prepend_scheme="always" if legacy else "first",
        split=False) and no normalizer, EVEN WHEN a tokenizer.json is present (it ignores that file's
        normalizer; asserted on llama2_json). Metaspace does not prepend "▁" to a piece that already starts with
        one, so " Hello" gives ["▁He","ll","o"] where sentencepiece and every transformers-4 path give
        ["▁","▁He","ll","o"]. Its results (legacy true) are recorded as "transformers5_ids" where they differ
        from "ids" (30 of 169). With TinyLlama's legacy=false, transformers 5 behaves like transformers 4's
        fast legacy=false tokenizer (same ids on all 169 cases, 38 differ from "ids").
      * "sp_ids" = plain sentencepiece, which never treats "<s>" etc. in the text as special (20 of 169 differ).
      * "decoded" = the decoder HF uses for Llama (Llama-2's tokenizer.json and transformers 5's LlamaTokenizer):
        Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1 left): pieces joined, "▁" -> " ", <0xNN> bytes
        assembled, ONE leading space removed from the whole string. Special tokens are printed as their text
        with nothing stripped around them ("<s>" + "▁Hello" -> "<s> Hello"). Asserted equal to transformers 5's
        AutoTokenizer decode. transformers 4's slow decode differs on 38 of the 169 (it can leave a raw "▁" behind),
        so it is not used. "sp_decoded" (where different) is sentencepiece's own decode: control tokens
        print as "", <unk> as " ⁇ ".
      * ids_with_specials = [<s>] + ids (add_bos_token true), checked against transformers 5's AutoTokenizer
        BOS handling (it adds <s> even when the text already starts with "<s>", and for "").

Behaviour the C++ side must replicate (all visible in the cases)
    - Special (added) tokens are matched on the raw text before normalisation and pre-tokenisation, also in
      the middle of a word ("abc<|endoftext|>def" -> abc | <|endoftext|> | def, each side pre-tokenised alone).
      Near misses ("<|endoftext|", "< s>") are ordinary text.
    - ByteLevel decode joins the bytes of all tokens and converts with UTF-8 "lossy" rules (Rust's
      String::from_utf8_lossy: one U+FFFD per maximal invalid subsequence, e.g. a truncated 3-byte sequence
      E4 B8 -> one U+FFFD). ByteFallback (llama2_sp) works differently, see the last point and
      decode_cases.json.
    - qwen2 applies NFC before pre-tokenisation, so decoded != text for decomposed input ("e\\u0301" -> "é",
      Hangul jamo -> syllables, U+212B ANGSTROM SIGN -> U+00C5). Specials are matched before NFC.
    - llama3's ignore_merges, and the {1,3} digit groups of its regex vs single digits for qwen2.
    - The split regexes run in tokenizers' Oniguruma engine with Unicode classes: \\s is White_Space (\\t \\n
      \\v \\f \\r, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+3000), not
      U+200B, U+FEFF, U+180E or \\x1c..\\x1f; \\p{N} includes ¹²³, ½, Arabic-Indic and fullwidth digits, Ⅻ, ⑦.
      In llama3/qwen2, (?i:'s|...) also matches 'S, 'T, 'LL; GPT-2's contraction alternatives are
      case-sensitive ("DON'T" -> DON ' T). None of them treats the curly apostrophe as one.
    - ByteFallback decodes a run of consecutive <0xNN> pieces as a whole: if the run is not valid UTF-8, EVERY
      byte of it becomes U+FFFD, valid characters in it included (E4 B8 AD 80 -> four U+FFFD, where ByteLevel
      gives "中" + U+FFFD). A special token or a normal piece ends the run.
"""

import argparse
import io
import json
import random
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "golden" / "tokenizer_corpus.txt"
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "tokenizers"

EXPECTED_VERSIONS = {"tokenizers": "0.23.3", "sentencepiece": "0.2.3", "transformers": "5.24.0"}

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

LLAMA3_WHOLE_WORDS = [" tokenizer", " caf\u00e9"]    # extra llama3 vocab entries, see build_bytelevel
BPE_VOCAB = 1000        # byte-level styles: 256 byte tokens + 744 merges, specials appended after
TINY_VOCAB = 320        # tiny_gpt2: 256 byte tokens + 64 merges + <|endoftext|> = 321, the vocabulary of the
                        # golden gpt2 model fixture (tests/golden/fixtures/gpt2), so the two run together
SP_VOCAB = 1000         # llama2_sp: 3 specials + 256 byte pieces + characters + merges

# Cases every style gets, written as escapes so that invisible characters and CR are unambiguous.
EDGE_CASES = [
    "", " ", "  ", "   ", "\n", "\n\n", "\t", "\t\t", " \t ", "\r\n", "\r", "\r\n\r\n", " \n", "\n ", "  \n  ",
    "a", "Hello", " Hello", "Hello ", "  Hello  ", "hello world", "hello  world", "hello   world",
    "hello\nworld", "hello \nworld", "hello\n\nworld", "hello\r\nworld", "hello\rworld", "x\n\n\ny", "abc\n",
    "Windows line one\r\nWindows line two\r\n", "trailing spaces then CRLF   \r\n", "\r\n\r\nleading CRLFs",
    "mixed\r\n\n\r\nendings\n\r", "tab\r\n\tindent",
    "don't", "DON'T", "We'll", "I'M", "it's IT'S It'S it\u2019s 'tis 's' I'll've y'all", "'s", " 's", "x's'd",
    "1", "12", "123", "1234", "12345678901234567890", "3.14", "1,000", "v1.2", "x1y22z333", "-1", "10%",
    "Digits: \u0661\u0662\u0663\u0664 \u00b2\u00b3 \u00bd \u216b \uff19\uff19\uff19 \u2466",
    "e\u0301", "cafe\u0301", "\u00e9", "\u212b \u2126 \u1112\u1161\u11ab\u1100\u1173\u11af \u0041\u030a",
    "\ufeffHello", "a\u200bb", "\u200d", "\u00a0", "a\u00a0b", "a\u3000b", "a\u0085b", "a\u2028b\u2029c",
    "\x01", "\x7f", "\x1b[31mred\x1b[0m",
    "\U0001f44d", "\U0001f44d\U0001f3fd", "\U0001f1e9\U0001f1ea", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f3f3\ufe0f\u200d\U0001f308", "\u4e2d", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4",
    "x" + " " * 40 + "y", "ab" * 150, "9" * 100, "a tokenizer, a caf\u00e9, tokenizers",
    # \s of the pre-tokenizer regexes (Oniguruma) is Unicode White_Space: true for the first ten separators here,
    # false for the last five (Python's str.isspace() says yes to \x1c..\x1f)
    "a \u00a0b a \u3000b a \u0085b a \u2028b a \u2029b a \u2009b a \u202fb a \u1680b a \x0bb a \x0cb "
    "a \x1cb a \x1fb a \u200bb a \ufeffb a \u180eb",
]

# Style definitions. specials: added tokens, in id order (appended after the trained vocab for the
# tokenizer.json styles, as in GPT-2 / Llama 3 / Qwen2; 0..2 for SentencePiece, as in Llama 2).
STYLES = {
    "gpt2": dict(specials=["<|endoftext|>"],
                 chat=["Question: what is 2+2?<|endoftext|>Answer: 4<|endoftext|>"]),
    "llama3": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                             "<|eot_id|>"],
                   chat=["<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
                         "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"]),
    "qwen2": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                  chat=["<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                        "What is 2+2?<|im_end|>\n<|im_start|>assistant\n"]),
    "llama2_sp": dict(specials=["<unk>", "<s>", "</s>"],
                      chat=["<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhat is 2+2? [/INST] 4 "
                            "</s><s>[INST] Thanks! [/INST]",
                            "<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n4</s>"]),
}


# --------------------------------------------------------------------------------------------- corpus
def read_corpus():
    raw = CORPUS.read_bytes()
    text = raw.decode("utf-8")
    if "\r" in text:
        sys.exit(f"{CORPUS}: must have LF line ends (CRLF cases are generated from it and from EDGE_CASES)")
    required = {
        "tab": "\t", "ZWSP": "\u200b", "ZWJ": "\u200d", "BOM": "\ufeff", "SOH": "\x01", "DEL": "\x7f",
        "precomposed e-acute": "\u00e9", "decomposed e-acute": "e\u0301", "n-tilde": "\u00f1", "sharp s": "\u00df",
        "capital sharp s": "\u1e9e", "Chinese": "\u4e2d\u6587", "hiragana": "\u3053\u3093\u306b\u3061\u306f",
        "katakana": "\u30ab\u30bf\u30ab\u30ca", "Korean": "\ud55c\uad6d\uc5b4",
        "Arabic": "\u0645\u0631\u062d\u0628\u0627",
        "Greek": "\u0391\u0392\u0393", "thumbs up + skin tone": "\U0001f44d\U0001f3fd",
        "flag": "\U0001f1e9\U0001f1ea", "ZWJ family": "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "don't": "don't", "DON'T": "DON'T", "we'll": "we'll", "I'M": "I'M", "long number": "1234567890123",
        "<|endoftext|>": "<|endoftext|>", "<s>": "<s>", "</s>": "</s>", "<|im_start|>": "<|im_start|>",
        "<|begin_of_text|>": "<|begin_of_text|>", "C++": "#include <vector>", "Python": "def fib(",
        "indentation": "\n        ", "blank lines": "\n\n\n", "run of spaces": "        ",
    }
    missing = [k for k, v in required.items() if v not in text]
    if missing:
        sys.exit(f"{CORPUS}: missing required content: {missing}")
    if not re.search(r"[a-z]{300}", text):
        sys.exit(f"{CORPUS}: needs a 300-letter word")
    return text


def corpus_chunks(text):
    """Multi-line pieces of the corpus, found by their first and last lines."""
    def between(first, last):
        i = text.index(first)
        j = text.index(last, i) + len(last)
        return text[i:j]
    cpp = between("#include <cstdio>\n", "\n}\n")
    py = between("def fib(", "# 55\n")
    paras = between("A first paragraph", "whitespace.   \n")
    intro = between("Hello, world!", "spaces.  \n")
    return [intro, cpp, py, paras, cpp.replace("\n", "\r\n"), paras.replace("\n", "\r\n"), text]


def filler_sentences(n=3000, seed=1234):
    words = ("the of and to in is was for on that with as by at from it he she they we you this be are have "
             "had not but or an which one all were her his their there been if more when will would who so no "
             "time people year way day man thing woman life child world school state family student group "
             "country problem hand part place case week company system program question work government number "
             "night point home water room mother area money story fact month lot right study book eye job word "
             "business issue side kind head house service friend father power hour game line end member law car "
             "city community name president team minute idea kid body information back parent face others level "
             "office door health person art war history party result change morning reason research girl guy "
             "moment air teacher force education don't can't it's we'll they're I'm you've").split()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ws = [rng.choice(words) for _ in range(rng.randint(4, 14))]
        if rng.random() < 0.2:
            ws.insert(rng.randrange(len(ws)), str(rng.randint(0, 10 ** rng.randint(1, 6))))
        ws[0] = ws[0].capitalize()
        out.append(" ".join(ws) + rng.choice([".", ".", ".", "!", "?", ","]))
    return [" ".join(out[i:i + 5]) for i in range(0, n, 5)]


def style_cases(style, corpus):
    """(text, want_ids_with_specials) in order, deduplicated."""
    sp = STYLES[style]["specials"]
    first = sp[1] if style == "llama2_sp" else sp[0]          # the BOS-like one: <s> for Llama 2
    other = sp[-1] if len(sp) > 1 else sp[0]
    lines = [l for l in corpus.split("\n") if l]
    special = [first, first + other, first + first, other + first, "abc" + first + "def", " " + first + " ",
               first + " x", "x " + first, first + "\n", "\n" + first + "\n", "  " + first + "  x",
               first + "Hello", first[:-1], first[1:], "<" + first + ">", first.upper(),
               " ".join(sp), "".join(sp)] + STYLES[style]["chat"]
    texts = lines + corpus_chunks(corpus) + EDGE_CASES + special
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    with_specials = {lines[0], "", first + "Hello"}
    return [(t, t in with_specials) for t in out]


def training_texts(corpus):
    extra = [t for t in EDGE_CASES if t.strip()]
    return [corpus] * 3 + extra + filler_sentences()


# ----------------------------------------------------------------------------------------- json output
INVISIBLE = {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs", "Me"}


def _escape_invisible(s):
    """Escape characters a reviewer could not see; only ever applied to JSON text, where \\u escapes are valid."""
    out = []
    for ch in s:
        cp = ord(ch)
        cat = unicodedata.category(ch)
        # also characters NFC would change or combine (U+212B, Hangul jamo), which look like their NFC form
        if ch != " " and (cat in INVISIBLE or 0x300 <= cp <= 0x36F or 0xFE00 <= cp <= 0xFE0F
                          or 0x1100 <= cp <= 0x11FF or not unicodedata.is_normalized("NFC", ch)):
            if cp > 0xFFFF:
                cp -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)))
            else:
                out.append("\\u%04x" % cp)
        else:
            out.append(ch)
    return "".join(out)


def dump_list(path, items):
    """A JSON list with one compact object per line (diff-friendly, small)."""
    body = ",\n".join(" " + _escape_invisible(json.dumps(it, ensure_ascii=False, separators=(", ", ": ")))
                      for it in items)
    text = "[\n" + body + "\n]\n"
    assert json.loads(text) == items
    path.write_text(text, encoding="utf-8", newline="\n")


def dump_obj(path, obj):
    """As transformers' save_pretrained writes config files: indent 2, sorted keys, UTF-8."""
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8",
                    newline="\n")


def added_tokens_decoder(vocab_ids):
    return {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                     "special": True} for s, i in vocab_ids}


# ---------------------------------------------------------------------------------- tokenizer.json styles
def bytes_to_unicode():
    """GPT-2's byte -> printable character table (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def build_bytelevel(style, texts, vocab_size=BPE_VOCAB):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, \
        processors, trainers
    tok = Tokenizer(models.BPE())
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    else:
        pattern = LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=style == "llama3", use_regex=False)])
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    if style == "llama3":
        # ignore_merges as in Meta-Llama-3's tokenizer.json, plus whole-word vocab entries that no merge builds,
        # so that the cases actually depend on it: with ignore_merges the pre-tokens " tokenizer" and " café"
        # come out as one token each, without it they would be split by the merges.
        j = json.loads(tok.to_str())
        j["model"]["ignore_merges"] = True
        b2u = bytes_to_unicode()
        for word in LLAMA3_WHOLE_WORDS:
            piece = "".join(b2u[b] for b in word.encode("utf-8"))
            assert piece not in j["model"]["vocab"], piece
            j["model"]["vocab"][piece] = len(j["model"]["vocab"])
        tok = Tokenizer.from_str(json.dumps(j))
    n_vocab = tok.get_vocab_size()
    specials = STYLES[style]["specials"]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    ids = [tok.token_to_id(s) for s in specials]
    assert ids == list(range(n_vocab, n_vocab + len(specials))), ids
    if style == "llama3":
        bos = specials[0]
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                          special_tokens=[(bos, ids[0])])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def configs_bytelevel(style, tok):
    specials = STYLES[style]["specials"]
    sid = {s: tok.token_to_id(s) for s in specials}
    atd = added_tokens_decoder([(s, sid[s]) for s in specials])
    if style == "gpt2":
        e = "<|endoftext|>"
        tc = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": atd, "bos_token": e,
              "clean_up_tokenization_spaces": False, "eos_token": e, "errors": "replace", "model_max_length": 1024,
              "pad_token": None, "tokenizer_class": "GPT2Tokenizer", "unk_token": e}
        gc = {"_from_model_config": True, "bos_token_id": sid[e], "eos_token_id": sid[e]}
    elif style == "llama3":
        tc = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": atd,
              "bos_token": "<|begin_of_text|>", "clean_up_tokenization_spaces": False,
              "eos_token": "<|end_of_text|>", "model_input_names": ["input_ids", "attention_mask"],
              "model_max_length": 8192, "tokenizer_class": "PreTrainedTokenizerFast"}
        gc = {"bos_token_id": sid["<|begin_of_text|>"], "do_sample": True,
              "eos_token_id": [sid["<|end_of_text|>"], sid["<|eot_id|>"]], "temperature": 0.6, "top_p": 0.9}
    else:
        tc = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": atd, "bos_token": None,
              "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>", "errors": "replace",
              "model_max_length": 32768, "pad_token": "<|endoftext|>", "split_special_tokens": False,
              "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
        gc = {"bos_token_id": sid["<|endoftext|>"], "do_sample": True,
              "eos_token_id": [sid["<|im_end|>"], sid["<|endoftext|>"]], "pad_token_id": sid["<|endoftext|>"],
              "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8}
    return tc, gc


def references_bytelevel(style, d, texts):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    tk = Tokenizer.from_file(str(d / "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(d))
    cases = []
    for text, with_specials in texts:
        ids = tk.encode(text, add_special_tokens=False).ids
        decoded = tk.decode(ids, skip_special_tokens=False)
        for name, t in (("PreTrainedTokenizerFast", fast), (type(auto).__name__, auto)):
            got = t.encode(text, add_special_tokens=False)
            if got != ids:
                sys.exit(f"{style}: {name} disagrees with tokenizers on {text!r}: {got} vs {ids}")
            got = t.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
            if got != decoded:
                sys.exit(f"{style}: {name} decode disagrees on {text!r}: {got!r} vs {decoded!r}")
        case = {"text": text, "ids": ids, "decoded": decoded}
        if with_specials:
            ws = auto.encode(text, add_special_tokens=True)
            if ws != tk.encode(text, add_special_tokens=True).ids:
                sys.exit(f"{style}: add_special_tokens=True disagrees with the tokenizer.json post-processor")
            case["ids_with_specials"] = ws
        cases.append(case)

    b2u = bytes_to_unicode()
    vocab = tk.get_vocab()

    def byte_ids(bs):
        return [vocab[b2u[b]] for b in bs]

    def text_ids(s):
        return tk.encode(s, add_special_tokens=False).ids
    sp0 = vocab[STYLES[style]["specials"][0]]
    seqs = [byte_ids(b"\xe4"), byte_ids(b"\xe4\xb8"), byte_ids(b"\xe4\xb8\xad"), byte_ids(b"\x80"),
            byte_ids(b"\xff"), byte_ids(b"\xc3") + text_ids("a"), text_ids("ab") + byte_ids(b"\xe4") + text_ids("cd"),
            byte_ids(b"\xf0\x9f\x91") + byte_ids(b"\x8d"), byte_ids(b"\xed\xa0\x80"), byte_ids(b"\xc0\x80"),
            byte_ids(b"\xf4\x90\x80\x80"), byte_ids(b"\xf0\x9f") + [sp0] + byte_ids(b"\x91\x8d"),
            byte_ids(b"\xe4\xb8\xad\x80"),
            text_ids("Hi") + [sp0] + text_ids(" there"), [sp0], [sp0, sp0], []]
    return cases, decode_cases(tk, seqs)


def decode_cases(tk, seqs):
    out = []
    for ids in seqs:
        for skip in (False, True):
            out.append({"ids": ids, "skip_special_tokens": skip, "decoded": tk.decode(ids, skip_special_tokens=skip)})
    return out


def write_merges_strings_variant(src, dst):
    j = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    merges = j["model"]["merges"]
    assert all(isinstance(m, list) and len(m) == 2 and " " not in m[0] + m[1] for m in merges)
    j["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    (dst / "tokenizer.json").write_text(json.dumps(j, indent=2, ensure_ascii=False) + "\n", encoding="utf-8",
                                        newline="\n")
    from tokenizers import Tokenizer
    a = Tokenizer.from_file(str(src / "tokenizer.json"))
    b = Tokenizer.from_file(str(dst / "tokenizer.json"))
    assert a.to_str() == b.to_str(), "merges-as-strings variant loads differently"


# ------------------------------------------------------------------------------------------ llama2_sp
def build_sentencepiece(lines):
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, model_type="bpe", vocab_size=SP_VOCAB,
        byte_fallback=True, add_dummy_prefix=True, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>", unk_surface=" \u2047 ",
        character_coverage=0.9995, split_by_unicode_script=True, split_by_number=True, split_by_whitespace=True,
        max_sentencepiece_length=16, max_sentence_length=4192, hard_vocab_limit=False,
        shuffle_input_sentence=False, num_threads=1, minloglevel=2)
    return buf.getvalue()


def sp_legacy_encode(sp, specials_re, text):
    """transformers' legacy Llama encoding: split out special tokens, sp.encode() every other piece on its own."""
    ids = []
    for i, part in enumerate(specials_re.split(text)):
        if i % 2:
            ids.append(sp.piece_to_id(part))
        elif part:
            ids.extend(sp.encode(part))
    return ids


def llama_decoder():
    from tokenizers import decoders
    return decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                              decoders.Strip(content=" ", left=1, right=0)])


def references_sentencepiece(d, texts):
    import sentencepiece as spm
    from transformers import AutoTokenizer
    from transformers.tokenization_utils_sentencepiece import SentencePieceBackend
    sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
    specials = STYLES["llama2_sp"]["specials"]
    assert [sp.id_to_piece(i) for i in range(3)] == specials
    assert [sp.id_to_piece(i) for i in (3, 258)] == ["<0x00>", "<0xFF>"]
    specials_re = re.compile("(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")")
    slow = SentencePieceBackend(vocab_file=str(d / "tokenizer.model"), legacy=True, bos_token="<s>",
                                eos_token="</s>", unk_token="<unk>")
    auto = AutoTokenizer.from_pretrained(str(d))
    dec = llama_decoder()

    def decode(ids, skip=False):
        pieces = [sp.id_to_piece(i) for i in ids if not (skip and i in (0, 1, 2))]
        return dec.decode(pieces)
    cases, n_sp, n_t5 = [], 0, 0
    for text, with_specials in texts:
        ids = sp_legacy_encode(sp, specials_re, text)
        got = slow.encode(text, add_special_tokens=False)
        if got != ids:
            sys.exit(f"llama2_sp: SentencePieceBackend(legacy=True) disagrees on {text!r}: {got} vs {ids}")
        decoded = decode(ids)
        got = auto.decode(ids, skip_special_tokens=False)
        if got != decoded:
            sys.exit(f"llama2_sp: transformers decode disagrees on {text!r}: {got!r} vs {decoded!r}")
        case = {"text": text, "ids": ids, "decoded": decoded}
        if with_specials:
            ws = auto.encode(text, add_special_tokens=True)
            assert ws[0] == 1 and ws[1:] == auto.encode(text, add_special_tokens=False), (text, ws)
            case["ids_with_specials"] = [1] + ids
        sp_ids = sp.encode(text)
        if sp_ids != ids:
            case["sp_ids"] = sp_ids
            n_sp += 1
        sp_dec = sp.decode(ids)
        if sp_dec != decoded:
            case["sp_decoded"] = sp_dec
        t5 = auto.encode(text, add_special_tokens=False)
        if t5 != ids:
            case["transformers5_ids"] = t5
            n_t5 += 1
        cases.append(case)

    def b(bs):
        return [3 + x for x in bs]
    hello = sp.encode("Hello")
    seqs = [b(b"\xe4"), b(b"\xe4\xb8"), b(b"\xe4\xb8\xad"), b(b"\x80"), b(b"\xff"), b(b"\xc3") + sp.encode("a"),
            sp.encode("ab") + b(b"\xe4") + sp.encode("cd"), b(b"\xf0\x9f\x91") + b(b"\x8d"), b(b"\xed\xa0\x80"),
            b(b"\xc0\x80"), b(b"\xf4\x90\x80\x80"), b(b"\xf0\x9f") + [1] + b(b"\x91\x8d"), b(b"\xe4\xb8\xad\x80"),
            b(b"\xe4\xb8\xad") + sp.encode("x") + b(b"\x80"),
            hello, [sp.piece_to_id("\u2581")] + hello, [sp.piece_to_id("\u2581\u2581")] + hello, [1] + hello,
            hello + [2] + hello, [0], [1, 2], [], b(b"\n") + hello]
    dcases = []
    for ids in seqs:
        for skip in (False, True):
            got = decode(ids, skip)
            if got != auto.decode(ids, skip_special_tokens=skip):
                sys.exit(f"llama2_sp: transformers decode disagrees on ids {ids}")
            dcases.append({"ids": ids, "skip_special_tokens": skip, "decoded": got})
    print(f"llama2_sp: sentencepiece sp.encode differs from the HF reference on {n_sp}/{len(cases)} cases; "
          f"transformers 5's LlamaTokenizer on {n_t5}/{len(cases)}")
    return cases, dcases


def build_llama2_json(model_path):
    """tokenizer.json in the layout Llama-2 / TinyLlama ship, converted from tokenizer.model the way transformers 4's
    LlamaConverter (legacy=True) does it: vocab = the pieces by id, merges = every split of a piece into two pieces,
    ordered by the piece's score (ties: longer left part, longer right part, then piece id and part ids)."""
    import sentencepiece as spm
    from tokenizers import AddedToken, Tokenizer, models, normalizers, processors
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for i in range(sp.get_piece_size()):
        piece, score = sp.id_to_piece(i), sp.get_score(i)
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)       # stable
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for a, b, _ in merges], unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = llama_decoder()
    tok.post_processor = processors.TemplateProcessing(single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in STYLES["llama2_sp"]["specials"]])
    assert [tok.token_to_id(s) for s in STYLES["llama2_sp"]["specials"]] == [0, 1, 2]
    return tok


def check_llama2_json(d, cases, dcases):
    """llama2_json reuses llama2_sp's cases: the tokenizers library must reproduce them from tokenizer.json."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    tk = Tokenizer.from_file(str(d / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(d))
    for c in cases:
        got = tk.encode(c["text"], add_special_tokens=False).ids
        if got != c["ids"]:
            sys.exit(f"llama2_json: tokenizers disagrees with llama2_sp on {c['text']!r}: {got} vs {c['ids']}")
        assert tk.decode(got, skip_special_tokens=False) == c["decoded"], c["text"]
        if "ids_with_specials" in c:
            assert tk.encode(c["text"]).ids == c["ids_with_specials"], c["text"]
        # transformers 5 ignores the tokenizer.json normalizer for LlamaTokenizer (rebuilds it with Metaspace)
        assert auto.encode(c["text"], add_special_tokens=False) == c.get("transformers5_ids", c["ids"]), c["text"]
    for c in dcases:
        assert tk.decode(c["ids"], skip_special_tokens=c["skip_special_tokens"]) == c["decoded"], c["ids"]


def configs_sentencepiece():
    atd = added_tokens_decoder([("<unk>", 0), ("<s>", 1), ("</s>", 2)])
    tc = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": atd, "bos_token": "<s>",
          "clean_up_tokenization_spaces": False, "eos_token": "</s>", "legacy": True,
          "model_max_length": 2048, "pad_token": None, "padding_side": "right", "sp_model_kwargs": {},
          "spaces_between_special_tokens": False, "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>",
          "use_default_system_prompt": False}
    gc = {"bos_token_id": 1, "eos_token_id": 2, "max_length": 2048, "pad_token_id": 0}
    return tc, gc


# ----------------------------------------------------------------------------------------------- main
def check_versions():
    import sentencepiece
    import tokenizers
    import transformers
    have = {"tokenizers": tokenizers.__version__, "sentencepiece": sentencepiece.__version__,
            "transformers": transformers.__version__}
    if have != EXPECTED_VERSIONS:
        print(f"warning: the committed fixtures were made with {EXPECTED_VERSIONS}, this is {have}", file=sys.stderr)
    if not transformers.__version__.startswith("5."):
        sys.exit("needs transformers 5 (the llama2_sp cross-check uses its SentencePieceBackend)")
    return have


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=str(DEFAULT_OUT))
    args = ap.parse_args()
    have = check_versions()
    import transformers
    transformers.logging.set_verbosity_error()

    out = Path(args.outdir)
    corpus = read_corpus()
    train = training_texts(corpus)
    summary = []
    for style in ("gpt2", "llama3", "qwen2", "llama2_sp"):
        d = out / style
        d.mkdir(parents=True, exist_ok=True)
        texts = style_cases(style, corpus)
        if style == "llama2_sp":
            lines = [l for t in train for l in t.split("\n") if l]
            (d / "tokenizer.model").write_bytes(build_sentencepiece(lines))
            tc, gc = configs_sentencepiece()
        else:
            tok = build_bytelevel(style, train)
            tok.save(str(d / "tokenizer.json"), pretty=True)
            tc, gc = configs_bytelevel(style, tok)
        gc["transformers_version"] = have["transformers"]
        dump_obj(d / "tokenizer_config.json", tc)
        dump_obj(d / "generation_config.json", gc)
        if style == "llama2_sp":
            cases, dcases = references_sentencepiece(d, texts)
        else:
            cases, dcases = references_bytelevel(style, d, texts)
        dump_list(d / "cases.json", cases)
        dump_list(d / "decode_cases.json", dcases)
        summary.append((style, len(cases), len(dcases)))
        if style == "llama2_sp":
            v = out / "llama2_json"
            v.mkdir(parents=True, exist_ok=True)
            build_llama2_json(d / "tokenizer.model").save(str(v / "tokenizer.json"), pretty=True)
            for f in ("tokenizer_config.json", "generation_config.json", "cases.json", "decode_cases.json"):
                (v / f).write_bytes((d / f).read_bytes())
            check_llama2_json(v, cases, dcases)
            summary.append(("llama2_json", len(cases), len(dcases)))
        if style == "gpt2":
            # A GPT-2 tokenizer small enough for the golden gpt2 model: `minferc run --prompt` end to end.
            v = out / "tiny_gpt2"
            v.mkdir(parents=True, exist_ok=True)
            tiny = build_bytelevel("gpt2", train, vocab_size=TINY_VOCAB)
            assert tiny.get_vocab_size() == TINY_VOCAB + 1, tiny.get_vocab_size()
            tiny.save(str(v / "tokenizer.json"), pretty=True)
            tc, gc = configs_bytelevel("gpt2", tiny)
            gc["transformers_version"] = have["transformers"]
            dump_obj(v / "tokenizer_config.json", tc)
            dump_obj(v / "generation_config.json", gc)
            tcases, tdcases = references_bytelevel("gpt2", v, texts)
            dump_list(v / "cases.json", tcases)
            dump_list(v / "decode_cases.json", tdcases)
            summary.append(("tiny_gpt2", len(tcases), len(tdcases)))
            v = out / "gpt2_merges_strings"
            v.mkdir(parents=True, exist_ok=True)
            write_merges_strings_variant(d, v)
            for f in ("tokenizer_config.json", "generation_config.json", "cases.json", "decode_cases.json"):
                (v / f).write_bytes((d / f).read_bytes())
            # The variant must reproduce the cases through transformers too.
            from transformers import PreTrainedTokenizerFast
            fv = PreTrainedTokenizerFast(tokenizer_file=str(v / "tokenizer.json"))
            assert all(fv.encode(c["text"], add_special_tokens=False) == c["ids"] for c in cases)
            summary.append(("gpt2_merges_strings", len(cases), len(dcases)))

    total = 0
    print(f"{'fixture':22s} {'cases':>5s} {'decode':>6s}   files (bytes)")
    for style, n, nd in summary:
        files = sorted((out / style).iterdir())
        size = sum(f.stat().st_size for f in files)
        total += size
        print(f"{style:22s} {n:5d} {nd:6d}   " + ", ".join(f"{f.name} {f.stat().st_size}" for f in files)
              + f"  = {size}")
    print(f"total {total} bytes in {out}")


if __name__ == "__main__":
    main()
