// An Apollo Client as a web application ships it: its operations are in
// apollo/*.graphql, @apollo/generate-persisted-query-manifest writes them
// into a manifest, and the persisted-query link sends each by its id from
// that manifest (extensions.persistedQuery.sha256Hash), never its text.
//
//   node apollo.mjs <url> <token> <manifest> <operation>…
//
// runs each operation named (Features, Reads, or Unlisted: a query that is
// in no manifest, sent by its text) and prints one JSON line per
// operation: {"op", "data"} or {"op", "codes"}, the error codes.
import { readFileSync } from "node:fs";
import { ApolloClient, HttpLink, InMemoryCache, gql } from "@apollo/client";
import { PersistedQueryLink } from "@apollo/client/link/persisted-queries";
import { generatePersistedQueryIdsFromManifest } from "@apollo/persisted-query-lists";

const [url, token, manifestPath, ...ops] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
const http = new HttpLink({ uri: url, headers: { Authorization: `Bearer ${token}` } });
const persisted = new ApolloClient({
  link: new PersistedQueryLink(generatePersistedQueryIdsFromManifest({ loadManifest: () => manifest })).concat(http),
  cache: new InMemoryCache(),
});
const plain = new ApolloClient({ link: http, cache: new InMemoryCache() });

const documents = {
  Features: gql(readFileSync(new URL("apollo/features.graphql", import.meta.url), "utf8")),
  Reads: gql(readFileSync(new URL("apollo/reads.graphql", import.meta.url), "utf8")),
  Unlisted: gql`query Unlisted { listFeatures { key ttlSeconds } }`,
};

for (const op of ops) {
  const client = op === "Unlisted" ? plain : persisted;
  try {
    const { data } = await client.query({ query: documents[op], variables: { entityId: "u1" }, fetchPolicy: "network-only" });
    process.stdout.write(JSON.stringify({ op, data }) + "\n");
  } catch (e) {
    const errors = e.errors ?? e.result?.errors ?? [];
    const codes = errors.map((x) => x.extensions?.code ?? x.message);
    process.stdout.write(JSON.stringify({ op, codes: codes.length ? codes : [String(e)] }) + "\n");
  }
}
