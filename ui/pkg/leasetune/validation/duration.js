// Durations exactly as the server reads and prints them: a port of Go's
// time.ParseDuration and time.Duration.String (Go 1.26 src/time/format.go
// and time.go) and of leasetune's election.ParseDuration
// (pkg/election/parse.go), on BigInt nanoseconds, since a JavaScript number
// cannot hold every int64. golden.json (written by `go run ./hack/golden`
// from the Go code) holds the expected answers; validation.test.js checks
// every one, so this file cannot drift from the server.

const NS = 1n;
const US = 1000n * NS;
const MS = 1000n * US;
const S = 1000n * MS;
const M = 60n * S;
const H = 60n * M;

const UNITS = {
  ns: NS, us: US, 'µs': US, 'μs': US, ms: MS, s: S, m: M, h: H
};

const TWO63 = 1n << 63n;
const MAX_INT64 = TWO63 - 1n;

// utf8 encodes s as Go holds a string: UTF-8 bytes (a lone surrogate
// becomes U+FFFD, as the browser sends it). Written out so the port needs
// no TextEncoder (jsdom's jest environment has none).
function utf8(s) {
  const out = [];

  for (const ch of s) {
    let cp = ch.codePointAt(0);

    if (cp >= 0xD800 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    if (cp < 0x80) {
      out.push(cp);
    } else if (cp < 0x800) {
      out.push(0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out.push(0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F));
    } else {
      out.push(0xF0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3F), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F));
    }
  }

  return Uint8Array.from(out);
}

const UNIT_BYTES = Object.entries(UNITS).map(([name, ns]) => [utf8(name), ns]);

function unitOf(bytes) {
  const hit = UNIT_BYTES.find(([b]) => sameBytes(b, bytes));

  return hit ? hit[1] : undefined;
}

// Go's time.quote: printable ASCII as is (with " and \ escaped), every
// byte of any other rune as \xNN.
function timeQuote(bytes) {
  let out = '"';
  let i = 0;

  while (i < bytes.length) {
    const b = bytes[i];

    if (b < 0x80) {
      if (b < 0x20) {
        out += `\\x${ hex2(b) }`;
      } else {
        if (b === 0x22 || b === 0x5c) {
          out += '\\';
        }
        out += String.fromCharCode(b);
      }
      i++;
      continue;
    }
    const width = runeWidth(bytes, i);

    for (let j = 0; j < width; j++) {
      out += `\\x${ hex2(bytes[i + j]) }`;
    }
    i += width;
  }

  return `${ out }"`;
}

function hex2(b) {
  return b.toString(16).padStart(2, '0');
}

// runeWidth is the length of the UTF-8 sequence at i as Go's range loop
// decodes it (1 for an invalid byte).
function runeWidth(bytes, i) {
  const b = bytes[i];
  const need = b >= 0xF0 && b < 0xF5 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 1;

  if (need === 1 || i + need > bytes.length) {
    return 1;
  }
  for (let j = 1; j < need; j++) {
    if ((bytes[i + j] & 0xC0) !== 0x80) {
      return 1;
    }
  }

  return need;
}

/**
 * goParseDuration is Go's time.ParseDuration: it returns
 * { ns: BigInt } or { error: string } with Go's message, e.g.
 * 'time: missing unit in duration "10"'.
 */
export function goParseDuration(str) {
  const orig = utf8(str);
  let s = orig;
  let d = 0n;
  let neg = false;
  const invalid = () => ({ error: `time: invalid duration ${ timeQuote(orig) }` });

  if (s.length > 0 && (s[0] === 0x2d || s[0] === 0x2b)) {
    neg = s[0] === 0x2d;
    s = s.subarray(1);
  }
  if (s.length === 1 && s[0] === 0x30) {
    return { ns: 0n };
  }
  if (s.length === 0) {
    return invalid();
  }
  const isDigit = (c) => c >= 0x30 && c <= 0x39;

  while (s.length > 0) {
    let v = 0n;
    let f = 0n;
    let scale = 1;

    if (!(s[0] === 0x2e || isDigit(s[0]))) {
      return invalid();
    }
    // leadingInt
    const pl = s.length;
    let i = 0;

    for (; i < s.length && isDigit(s[i]); i++) {
      if (v > TWO63 / 10n) {
        return invalid();
      }
      v = v * 10n + BigInt(s[i] - 0x30);
      if (v > TWO63) {
        return invalid();
      }
    }
    s = s.subarray(i);
    const pre = pl !== s.length;
    let post = false;

    if (s.length > 0 && s[0] === 0x2e) {
      s = s.subarray(1);
      const pl2 = s.length;
      let overflow = false;
      let j = 0;

      // leadingFraction
      for (; j < s.length && isDigit(s[j]); j++) {
        if (overflow) {
          continue;
        }
        if (f > MAX_INT64 / 10n) {
          overflow = true;
          continue;
        }
        const y = f * 10n + BigInt(s[j] - 0x30);

        if (y > TWO63) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      s = s.subarray(j);
      post = pl2 !== s.length;
    }
    if (!pre && !post) {
      return invalid();
    }
    let k = 0;

    for (; k < s.length; k++) {
      if (s[k] === 0x2e || isDigit(s[k])) {
        break;
      }
    }
    if (k === 0) {
      return { error: `time: missing unit in duration ${ timeQuote(orig) }` };
    }
    const u = s.subarray(0, k);

    s = s.subarray(k);
    const unit = unitOf(u);

    if (unit === undefined) {
      return { error: `time: unknown unit ${ timeQuote(u) } in duration ${ timeQuote(orig) }` };
    }
    if (v > TWO63 / unit) {
      return invalid();
    }
    v *= unit;
    if (f > 0n) {
      // uint64(float64(f) * (float64(unit) / scale)), as Go computes it.
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > TWO63) {
        return invalid();
      }
    }
    d += v;
    if (d > TWO63) {
      return invalid();
    }
  }
  if (neg) {
    return { ns: -d };
  }
  if (d > MAX_INT64) {
    return invalid();
  }

  return { ns: d };
}

function sameBytes(a, b) {
  if (a.length !== b.length) {
    return false;
  }
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) {
      return false;
    }
  }

  return true;
}

// Go's unicode.IsSpace and unicode.Cf, for election.ParseDuration's
// refusal of surrounding white space and invisible characters.
const GO_SPACE = new Set([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]);

function isSurroundingJunk(cp) {
  return GO_SPACE.has(cp) || (cp >= 0x2000 && cp <= 0x200A) || /^\p{Cf}$/u.test(String.fromCodePoint(cp));
}

/**
 * goQuote is Go's strconv.Quote (%q) for the strings a user types: a
 * printable rune as is (" and \ escaped), \a \b \f \n \r \t \v, other
 * runes below U+0080 as \xNN, other unprintable ones as \uNNNN or
 * \UNNNNNNNN. Printable means strconv.IsPrint: a letter, mark, number,
 * punctuation or symbol, or the ASCII space.
 */
export function goQuote(s) {
  let out = '"';

  for (const ch of s) {
    const cp = ch.codePointAt(0);

    if (cp === 0x22 || cp === 0x5c) {
      out += `\\${ ch }`;
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += ch;
    } else if (cp >= 0xD800 && cp <= 0xDFFF) {
      out += '\\ufffd'; // a lone surrogate reaches Go as U+FFFD (it is printable)
    } else if (cp >= 0x80 && /^[\p{L}\p{M}\p{N}\p{P}\p{S}]$/u.test(ch)) {
      out += ch;
    } else {
      const esc = {
        0x07: '\\a', 0x08: '\\b', 0x0C: '\\f', 0x0A: '\\n', 0x0D: '\\r', 0x09: '\\t', 0x0B: '\\v'
      }[cp];

      if (esc) {
        out += esc;
      } else if (cp < 0x80) {
        out += `\\x${ hex2(cp) }`;
      } else if (cp < 0x10000) {
        out += `\\u${ cp.toString(16).padStart(4, '0') }`;
      } else {
        out += `\\U${ cp.toString(16).padStart(8, '0') }`;
      }
    }
  }

  return `${ out }"`;
}

/**
 * parseDuration is election.ParseDuration for field (leaseDuration,
 * renewDeadline or retryPeriod): { ns: BigInt } or { error } with the
 * server's message, e.g. 'retryPeriod "10" is not a duration: time:
 * missing unit in duration "10"'. An empty value and surrounding white
 * space or invisible characters are refused, never trimmed.
 */
export function parseDuration(field, s) {
  const fail = (why) => ({ error: `${ field } ${ goQuote(s) } is not a duration: ${ why }` });

  if (s === '') {
    return fail('the value is empty');
  }
  const cps = Array.from(s).map((c) => c.codePointAt(0));

  if (isSurroundingJunk(cps[0]) || isSurroundingJunk(cps[cps.length - 1])) {
    return fail('leading or trailing white space or invisible characters are not allowed');
  }
  const r = goParseDuration(s);

  return r.error ? fail(r.error) : r;
}

/**
 * formatDuration is Go's time.Duration.String of ns (a BigInt of
 * nanoseconds): "30s", "1m30s", "1.5s", "999ms", "1µs", "0s".
 */
export function formatDuration(ns) {
  let u = ns < 0n ? -ns : ns;
  const neg = ns < 0n;
  let out = '';

  if (u < S) {
    let prec;
    let unit;

    if (u === 0n) {
      return '0s';
    } else if (u < US) {
      prec = 0;
      unit = 'ns';
    } else if (u < MS) {
      prec = 3;
      unit = 'µs';
    } else {
      prec = 6;
      unit = 'ms';
    }
    const [frac, rest] = fmtFrac(u, prec);

    out = `${ rest }${ frac }${ unit }`;
  } else {
    const [frac, secs] = fmtFrac(u, 9);

    u = secs;
    out = `${ u % 60n }${ frac }s`;
    u /= 60n;
    if (u > 0n) {
      out = `${ u % 60n }m${ out }`;
      u /= 60n;
      if (u > 0n) {
        out = `${ u }h${ out }`;
      }
    }
  }

  return neg ? `-${ out }` : out;
}

// fmtFrac is Go's: the fraction v/10**prec without trailing zeros (and
// without the point when it is 0), and the integer part.
function fmtFrac(v, prec) {
  let digits = '';
  let print = false;

  for (let i = 0; i < prec; i++) {
    const digit = v % 10n;

    print = print || digit !== 0n;
    if (print) {
      digits = `${ digit }${ digits }`;
    }
    v /= 10n;
  }

  return [print ? `.${ digits }` : '', v];
}

export const SECOND = S;
export const HOUR = H;
