// A Matrix client for bot/sas_test.go, built on matrix-js-sdk with its Rust
// crypto (the WASM build Element Web uses). It logs in as an operator,
// then takes one JSON command a line on stdin and answers one JSON line
// on stdout, carrying the command's "id":
//
//   {"cmd":"reset"}                    new cross-signing identity, as Element's "Reset identity"
//   {"cmd":"say","room":R,"body":B,"reply_to":E}  send an encrypted m.text
//   {"cmd":"verify","user":U,"device":D}          verify U's session D by emoji;
//        answers {"sas":[[emoji,name],...]} when the emoji show, confirms
//        them at once (the operator taps "They match"), and answers
//        {"ok":"verified"} when both sides are done
//   {"cmd":"restore"}                  sign this session with the identity in secret storage
//                                      (RECOVERY_KEY), as "Verify with recovery key" does
//   {"cmd":"quit"}
//
// Environment: HOMESERVER, USER_ID, PASSWORD, and RECOVERY_KEY for restore.
import { createInterface } from "node:readline";
import * as sdk from "matrix-js-sdk";
import { VerificationPhase, VerifierEvent, VerificationRequestEvent, decodeRecoveryKey } from "matrix-js-sdk/lib/crypto-api/index.js";
import { logger } from "matrix-js-sdk/lib/logger.js";

logger.setLevel(process.env.SAS_DEBUG ? "debug" : "error");

const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const { HOMESERVER, USER_ID, PASSWORD } = process.env;

const login = await sdk.createClient({ baseUrl: HOMESERVER }).login("m.login.password", {
  identifier: { type: "m.id.user", user: USER_ID },
  password: PASSWORD,
  initial_device_display_name: "js operator",
});
// ssKey is the secret storage key made on reset; the client stores the
// new cross-signing keys under it.
let ssKey = null;
if (process.env.RECOVERY_KEY) ssKey = { privateKey: decodeRecoveryKey(process.env.RECOVERY_KEY) };
const client = sdk.createClient({
  baseUrl: HOMESERVER,
  cryptoCallbacks: {
    getSecretStorageKey: async ({ keys }) => (ssKey ? [Object.keys(keys)[0], ssKey.privateKey] : null),
  },
  userId: login.user_id,
  deviceId: login.device_id,
  accessToken: login.access_token,
});
await client.initRustCrypto({ useIndexedDB: false });
const crypto = client.getCrypto();
const synced = new Promise((resolve) => {
  client.on(sdk.ClientEvent.Sync, (state) => {
    if (state === "PREPARED") resolve();
  });
});
await client.startClient({ initialSyncLimit: 1 });
await synced;
out({ ok: "ready", device: login.device_id });

// uia answers the homeserver's user-interactive auth with the password.
const uia = async (makeRequest) => {
  try {
    await makeRequest(null);
  } catch (err) {
    const session = err.data?.session;
    if (!session) throw err;
    await makeRequest({
      type: "m.login.password",
      identifier: { type: "m.id.user", user: USER_ID },
      password: PASSWORD,
      session,
    });
  }
};

async function reset() {
  ssKey = await crypto.createRecoveryKeyFromPassphrase();
  await crypto.bootstrapSecretStorage({ setupNewSecretStorage: true, createSecretStorageKey: async () => ssKey });
  await crypto.bootstrapCrossSigning({ setupNewCrossSigning: true, authUploadDeviceSigningKeys: uia });
  const id = await crypto.getCrossSigningKeyId();
  return { ok: "reset", master: id, recovery_key: ssKey.encodedPrivateKey };
}

// restore signs this session with the identity kept in secret storage, as
// Element's "Verify with recovery key" does on a new session.
async function restore() {
  // The public identity must be known before its private keys are taken.
  if (!(await crypto.userHasCrossSigningKeys(client.getUserId(), true))) throw new Error("the account has no identity");
  await crypto.bootstrapCrossSigning({ authUploadDeviceSigningKeys: uia });
  for (let i = 0; i < 80; i++) {
    const status = await crypto.getDeviceVerificationStatus(client.getUserId(), client.getDeviceId());
    if (status?.signedByOwner) return { ok: "restored" };
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error("this session is not signed by the identity in secret storage");
  return { ok: "restored" };
}

async function say({ room, body, reply_to }) {
  const content = { msgtype: "m.text", body };
  if (reply_to) content["m.relates_to"] = { "m.in_reply_to": { event_id: reply_to } };
  await client.getCrypto().getUserDeviceInfo([client.getUserId()], true);
  const res = await client.sendEvent(room, "m.room.message", content);
  return { ok: "sent", event_id: res.event_id };
}

async function verify({ user, device, id }) {
  await crypto.getUserDeviceInfo([user], true);
  const request = await crypto.requestDeviceVerification(user, device);
  await new Promise((resolve, reject) => {
    // The phase is checked on every change and, in case a change came
    // between the request's making and the listener, a few times a second.
    let timer;
    const check = () => {
      if (request.phase === VerificationPhase.Ready) {
        clearInterval(timer);
        resolve();
      }
      if (request.phase === VerificationPhase.Cancelled) {
        clearInterval(timer);
        reject(new Error("cancelled: " + JSON.stringify(request.cancellationCode)));
      }
    };
    request.on(VerificationRequestEvent.Change, check);
    timer = setInterval(check, 250);
    check();
  });
  const verifier = await request.startVerification("m.sas.v1");
  verifier.on(VerifierEvent.ShowSas, (sas) => {
    out({ sas: sas.sas.emoji, id });
    sas.confirm();
  });
  await verifier.verify();
  return { ok: "verified" };
}

const handlers = { reset, restore, say, verify };
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.cmd === "quit") break;
  // Commands run side by side: a verification waits for the bot while
  // the test sends messages.
  handlers[cmd.cmd](cmd).then(
    (res) => out({ ...res, id: cmd.id }),
    (err) => out({ error: String(err?.stack || err), id: cmd.id }),
  );
}
client.stopClient();
process.exit(0);
