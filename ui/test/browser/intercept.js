// Intercepts every request a page makes (puppeteer's request
// interception, and the websocket handshakes through the DevTools
// protocol) and records what a Rancher UI page must never do (issue 25):
// mint a Rancher token (POST /v3/tokens), go through a proxy path
// (/proxy/: Rancher's or the kube-apiserver's service proxy), call
// leasetune's former page API (/leasetune/v1), or carry a credential header
// of its own (X-Leasetune-Token or any other). Such a request is aborted
// and recorded as a violation; every request is logged (method and URL),
// so that a test can also count the page's reads (no polling).
//
// strict (the stand-in shell, whose every request is known): a header
// outside the ones a browser and Rancher's dashboard send is a violation.
// Not strict (Rancher's real dashboard): a header whose name speaks of a
// credential (token, auth, secret, credential, leasetune) is.

// STANDARD are the headers the browser sets and the dashboard's own
// (shell/plugins/axios.js: Accept and x-api-csrf, Rancher's CSRF check).
const STANDARD = new Set(['accept', 'accept-language', 'accept-encoding', 'content-type', 'content-length', 'cookie',
  'origin', 'referer', 'user-agent', 'cache-control', 'pragma', 'upgrade-insecure-requests', 'range', 'if-none-match',
  'if-modified-since', 'priority', 'x-api-csrf', 'connection', 'host', 'upgrade']);

function badHeader(name, strict) {
  const n = name.toLowerCase();

  if (n.startsWith('sec-')) {
    return false; // the browser's own (sec-fetch-*, sec-ch-ua*, sec-websocket-*)
  }
  if (/token|auth|secret|credential|leasetune/.test(n)) {
    return true;
  }

  return strict && !STANDARD.has(n);
}

// violationsOf returns what is wrong with a request.
function violationsOf(method, url, headers, strict) {
  const out = [];
  const { pathname } = new URL(url);

  if (method === 'POST' && /\/v3\/tokens\/?$/.test(pathname)) {
    out.push(`POST ${ url }: a Rancher token minted`);
  }
  if (url.includes('/proxy/')) {
    out.push(`${ method } ${ url }: a proxy path`);
  }
  if (url.includes('/leasetune/v1')) {
    out.push(`${ method } ${ url }: leasetune's former page API`);
  }
  Object.keys(headers || {}).filter((h) => badHeader(h, strict)).forEach((h) => {
    out.push(`${ method } ${ url }: header ${ h }`);
  });

  return out;
}

/**
 * intercept turns on request interception for page and returns
 * { requests, websockets, violations }, filled as the page goes:
 * requests are "METHOD URL" of every request, websockets the URLs of the
 * websockets opened.
 */
async function intercept(page, { strict }) {
  const seen = { requests: [], websockets: [], violations: [] };

  await page.setRequestInterception(true);
  page.on('request', (r) => {
    const v = violationsOf(r.method(), r.url(), r.headers(), strict);

    seen.requests.push(`${ r.method() } ${ r.url() }`);
    if (v.length) {
      seen.violations.push(...v);
      r.abort('accessdenied').catch(() => {});

      return;
    }
    r.continue().catch(() => {});
  });
  const cdp = await page.createCDPSession();

  await cdp.send('Network.enable');
  const wsURL = {};

  cdp.on('Network.webSocketCreated', (e) => {
    wsURL[e.requestId] = e.url;
    seen.websockets.push(e.url);
    seen.violations.push(...violationsOf('GET', e.url.replace(/^ws/, 'http'), {}, strict));
  });
  cdp.on('Network.webSocketWillSendHandshakeRequest', (e) => {
    const u = (wsURL[e.requestId] || '').replace(/^ws/, 'http');

    seen.violations.push(...violationsOf('GET', u || 'http://unknown/', e.request.headers, strict));
  });

  return seen;
}

module.exports = { intercept, violationsOf };
