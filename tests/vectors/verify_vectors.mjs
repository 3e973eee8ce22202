// Runs docs/signature-vectors.json in Node.js, independently of hookrelay's Python signer:
//   v1 (HMAC)      signed and verified with the `standardwebhooks` npm package (which knows only v1);
//   v1a (Ed25519)  signed and verified with Node's own crypto (OpenSSL), with the same header and clock
//                  checks the package makes for v1.
//
//   node tests/vectors/verify_vectors.mjs [docs/signature-vectors.json] [--json]
//
// Prints one line per case (or, with --json, one JSON object of results) and exits 1 if any case disagrees
// with the file: a signature that differs, a valid request refused or an invalid one accepted.
// A consumer can copy verifyV1a below: it is a complete v1a verifier.
import { createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { readFileSync } from "node:fs";
import standardwebhooks from "standardwebhooks";

const { Webhook } = standardwebhooks;

const args = process.argv.slice(2);
const asJson = args.includes("--json");
const path = args.find((a) => !a.startsWith("--")) ?? new URL("../../docs/signature-vectors.json", import.meta.url);
const vectors = JSON.parse(readFileSync(path, "utf8"));
const TOLERANCE_SECONDS = vectors.tolerance_seconds;

// An Ed25519 private key from its 32-byte seed (whsk_): PKCS#8 is a fixed 16-byte prefix + the seed.
const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const privateKeyOf = (whsk) =>
  createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(whsk.slice("whsk_".length), "base64")]),
    format: "der",
    type: "pkcs8",
  });
const publicKeyOf = (whpk) =>
  createPublicKey({
    key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(whpk.slice("whpk_".length), "base64").toString("base64url") },
    format: "jwk",
  });
const whpkOf = (whsk) =>
  "whpk_" + Buffer.from(createPublicKey(privateKeyOf(whsk)).export({ format: "jwk" }).x, "base64url").toString("base64");

class VerificationError extends Error {}

// Verify a v1a request with a whpk_ public key: headers present, timestamp within tolerance, any v1a entry valid.
function verifyV1a(whpk, body, headers, nowSeconds = Math.floor(Date.now() / 1000)) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const id = lower["webhook-id"];
  const timestamp = lower["webhook-timestamp"];
  const signatures = lower["webhook-signature"];
  if (!id || !timestamp || !signatures) throw new VerificationError("Missing required headers");
  if (!/^\d+$/.test(timestamp)) throw new VerificationError("Invalid timestamp");
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) {
    throw new VerificationError("Message timestamp outside the tolerance");
  }
  const key = publicKeyOf(whpk);
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  for (const entry of signatures.split(" ")) {
    const [version, signature] = entry.split(",");
    if (version === "v1a" && signature && verify(null, signed, key, Buffer.from(signature, "base64"))) return;
  }
  throw new VerificationError("No matching signature found");
}

// Verify a v1 request with the standardwebhooks package, its clock set to `now`.
function verifyV1(whsec, body, headers, nowSeconds) {
  const realNow = Date.now;
  Date.now = () => nowSeconds * 1000;
  try {
    new Webhook(whsec).verify(body, headers);
  } finally {
    Date.now = realNow;
  }
}

function signAll(vector) {
  const body = Buffer.from(vector.body_base64, "base64");
  return vector.signing_keys
    .map((key) =>
      key.startsWith("whsk_")
        ? "v1a," + sign(null, Buffer.concat([Buffer.from(`${vector.id}.${vector.timestamp}.`), body]), privateKeyOf(key)).toString("base64")
        : new Webhook(key).sign(vector.id, new Date(vector.timestamp * 1000), body),
    )
    .join(" ");
}

const results = { signing: [], verifying: [] };
for (const vector of vectors.signing) {
  const signature = signAll(vector);
  const publicKeys = vector.signing_keys.filter((k) => k.startsWith("whsk_")).map(whpkOf);
  const ok =
    signature === vector.headers["webhook-signature"] &&
    String(vector.timestamp) === vector.headers["webhook-timestamp"] &&
    vector.id === vector.headers["webhook-id"] &&
    JSON.stringify(publicKeys) === JSON.stringify(vector.public_keys);
  results.signing.push({ name: vector.name, ok, signature });
}
for (const c of vectors.verifying) {
  const body = Buffer.from(c.body_base64, "base64");
  let verified = true;
  let error = null;
  try {
    if (c.key.startsWith("whpk_")) verifyV1a(c.key, body, c.headers, c.now);
    else verifyV1(c.key, body, c.headers, c.now);
  } catch (e) {
    verified = false;
    error = e.message;
  }
  results.verifying.push({ name: c.name, verified, expected: c.valid, ok: verified === c.valid, error });
}

const failed = [...results.signing, ...results.verifying].filter((r) => !r.ok);
if (asJson) {
  console.log(JSON.stringify(results));
} else {
  for (const r of results.signing) console.log(`${r.ok ? "ok  " : "FAIL"} signing   ${r.name}`);
  for (const r of results.verifying) {
    const outcome = r.verified ? "accepted" : `refused (${r.error})`;
    console.log(`${r.ok ? "ok  " : "FAIL"} verifying ${r.name}: ${outcome}`);
  }
  console.log(`${failed.length ? "FAILED" : "passed"}: ${results.signing.length} signing, ${results.verifying.length} verifying cases`);
}
process.exit(failed.length ? 1 : 0);
