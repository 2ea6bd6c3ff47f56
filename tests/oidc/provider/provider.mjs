// A real OpenID provider for the portal's single sign-on tests: panva's certified oidc-provider with one static
// client, a few users whose claims include groups, a password form, and an end-session page.
//
// Started by tests/oidc/conftest.py: `node provider.mjs` on a free loopback port (it prints one JSON line,
// {"issuer": ..., "port": ...}, once it listens). Configured by environment variables:
//   PORTAL_URL      the portal's base URL: redirect URI <PORTAL_URL>/oidc/callback/, logout back to /login/
//   CLIENT_ID, CLIENT_SECRET   the static client
//   USERS           JSON {"<login>": {"password": ..., "claims": {...}}}; sub is the login unless claims say
//   ALLOW_TAMPERING 1: POST /__test__/next-id-token mode=expired|wrong-audience|bad-signature makes the next
//                   ID token the token endpoint answers expired, for another audience, or altered after
//                   signing (tokens this provider would never issue; test-only, never on by default).
import crypto from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

const PORTAL_URL = (process.env.PORTAL_URL || 'http://127.0.0.1:8000').replace(/\/$/, '');
const CLIENT_ID = process.env.CLIENT_ID || 'gpu-portal';
const CLIENT_SECRET = process.env.CLIENT_SECRET || 'gpu-portal-test-secret';
const USERS = JSON.parse(process.env.USERS || '{}');
const ALLOW_TAMPERING = process.env.ALLOW_TAMPERING === '1';

// The provider's signing key (RS256), made fresh at every start and published at /jwks.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const b64url = (data) => Buffer.from(data).toString('base64url');

function signJwt(header, payload) {
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  const signature = crypto.sign('sha256', Buffer.from(input), privateKey);
  return `${input}.${signature.toString('base64url')}`;
}

// What the test switch does to one ID token the provider issued.
function doctor(idToken, mode) {
  const [rawHeader, rawPayload, rawSignature] = idToken.split('.');
  const header = JSON.parse(Buffer.from(rawHeader, 'base64url'));
  const payload = JSON.parse(Buffer.from(rawPayload, 'base64url'));
  const now = Math.floor(Date.now() / 1000);
  switch (mode) {
    case 'expired':
      return signJwt(header, { ...payload, iat: now - 7200, exp: now - 3600 });
    case 'wrong-audience':
      return signJwt(header, { ...payload, aud: 'some-other-application' });
    case 'bad-signature': {
      // Someone promotes themselves on the way: the payload changes, the provider's signature stays.
      const forged = { ...payload, groups: [...(payload.groups || []), 'gpu-vision-lead', 'gpu-operators'] };
      return `${rawHeader}.${b64url(JSON.stringify(forged))}.${rawSignature}`;
    }
    default:
      throw new Error(`unknown mode ${mode}`);
  }
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function page(title, body) {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title></head>
<body><main><h1>${escape(title)}</h1>${body}</main></body></html>`;
}

function loginPage(uid, error) {
  return page('Test provider sign-in', `
${error ? `<p id="op-error" role="alert">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
  <label>Login <input name="login" id="op-login" autocomplete="off" required></label>
  <label>Password <input name="password" id="op-password" type="password" required></label>
  <button type="submit" id="op-submit">Sign in</button>
</form>`);
}

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uris: [`${PORTAL_URL}/oidc/callback/`],
      post_logout_redirect_uris: [`${PORTAL_URL}/login/`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    }],
    jwks: { keys: [signingJwk] },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'given_name', 'family_name', 'preferred_username'],
      groups: ['groups'],
    },
    // Scope claims in the ID token too, as Keycloak, Entra ID and Okta can be set to send groups.
    conformIdTokenClaims: false,
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          ctx.body = page('Sign out of the test provider?', `${form}
<button type="submit" form="op.logoutForm" value="yes" name="logout" id="op-logout-yes">Yes, sign me out</button>
<button type="submit" form="op.logoutForm" id="op-logout-no">No, stay signed in</button>`);
        },
      },
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, id) {
      const user = USERS[id];
      if (!user) return undefined;
      return { accountId: id, async claims() { return { sub: id, ...user.claims }; } };
    },
  });
  provider.proxy = false;

  let nextIdToken = null;

  provider.use(async (ctx, next) => {
    const match = ctx.path.match(/^\/interaction\/([^/]+)(\/login)?$/);
    if (ALLOW_TAMPERING && ctx.path === '/__test__/next-id-token' && ctx.method === 'POST') {
      nextIdToken = (await readForm(ctx.req)).get('mode');
      ctx.body = { next_id_token: nextIdToken };
      return;
    }
    if (!match) {
      await next();
      if (ctx.path === '/token' && ctx.status === 200 && nextIdToken && ctx.body?.id_token) {
        ctx.body = { ...ctx.body, id_token: doctor(ctx.body.id_token, nextIdToken) };
        nextIdToken = null;
      }
      return;
    }
    ctx.set('cache-control', 'no-store');
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const { uid, prompt, params, session } = details;
    if (match[2] && ctx.method === 'POST') {
      const form = await readForm(ctx.req);
      const login = form.get('login') || '';
      const user = USERS[login];
      if (!user || user.password !== form.get('password')) {
        ctx.type = 'html';
        ctx.body = loginPage(uid, 'Wrong login or password.');
        return;
      }
      await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: login } }, {
        mergeWithLastSubmission: false,
      });
      ctx.respond = false;
      return;
    }
    if (prompt.name === 'login') {
      ctx.type = 'html';
      ctx.body = loginPage(uid, '');
      return;
    }
    // Consent: the portal is a first-party client; grant what it asked for without a question.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    ctx.respond = false;
  });

  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer, port })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
