// A real OAuth 2.1 / OpenID authorization server (npm oidc-provider) on 127.0.0.1, for Playa's tests.
// Dynamic registration, PKCE, resource indicators (opaque access tokens bound to the resource),
// refresh tokens, introspection (for the MCP server) and revocation. The dev interactions
// (any login, then consent) stand for the owner's sign-in. Environment:
//   ACCESS_TTL         seconds an access token lives (default 3600)
//   INTROSPECT_SECRET  the client secret of "mcp-server", the resource server's introspection client
//   STATIC_SECRET      the client secret of "playa-static", a pre-registered native client with a
//                      loopback redirect (any port, RFC 8252) that authenticates with client_secret_basic
import http from "node:http";
import Provider from "oidc-provider";

const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;
const accessTtl = Number(process.env.ACCESS_TTL || 3600);

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: "mcp-server",
      client_secret: process.env.INTROSPECT_SECRET,
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
    ...(process.env.STATIC_SECRET
      ? [
          {
            client_id: "playa-static",
            client_secret: process.env.STATIC_SECRET,
            application_type: "native",
            grant_types: ["authorization_code", "refresh_token"],
            response_types: ["code"],
            redirect_uris: ["http://127.0.0.1/oauth/callback"],
            token_endpoint_auth_method: "client_secret_basic",
          },
        ]
      : []),
  ],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: "mcp mcp:write",
        audience: resource,
        accessTokenTTL: accessTtl,
        accessTokenFormat: "opaque",
      }),
    },
  },
  scopes: ["openid", "offline_access", "mcp", "mcp:write"],
  pkce: { required: () => true },
  issueRefreshToken: async () => true,
  ttl: { RefreshToken: 24 * 3600 },
});
// Loopback over plain HTTP is what this test needs; oidc-provider allows it outside production.
server.on("request", provider.callback());
process.stderr.write(`PLAYA_LISTENING ${port}\n`);
