// This service driven by the official Svix JavaScript SDK (npm `svix`, package-lock.json beside this file), as a
// platform's code drives it: SVIX_TOKEN (a platform key) and SVIX_SERVER_URL (this service) are its only settings.
// The steps of the SDKs' kitchen-sink tests, then what a move from Svix relies on besides.
// Run by tests/svix/test_svix_kitchen_sink.py with node's own test runner (node --test).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Svix } from "svix";

const svix = new Svix(process.env.SVIX_TOKEN, { serverUrl: process.env.SVIX_SERVER_URL });

/** Awaits a creation; a 409 (it exists already) is the only error allowed. */
async function createdOrTaken(creation) {
  try {
    await creation;
  } catch (error) {
    assert.equal(error.code, 409, `a 409 is the only error expected, not ${error.code}`);
  }
}

test("endpoints are created with channels, patched and deleted", async () => {
  const app = await svix.application.create({ name: "App" });
  await createdOrTaken(svix.eventType.create({ name: "event.started", description: "Something started" }));
  await createdOrTaken(svix.eventType.create({ name: "event.ended", description: "Something ended" }));

  const endpoint = await svix.endpoint.create(app.id, { url: "https://example.svix.com/", channels: ["ch1", "ch0"] });
  assert.deepEqual(endpoint.channels?.sort(), ["ch0", "ch1"]);
  assert.deepEqual(endpoint.eventTypes ?? [], []);

  const patched = await svix.endpoint.patch(app.id, endpoint.id, { eventTypes: ["event.started", "event.ended"] });
  assert.deepEqual(patched.channels?.sort(), ["ch0", "ch1"]);
  assert.deepEqual(patched.eventTypes?.sort(), ["event.ended", "event.started"]);

  await svix.endpoint.delete(app.id, endpoint.id); // an empty 204 body
  await assert.rejects(svix.endpoint.get(app.id, endpoint.id), (error) => error.code === 404);
});

test("an application is got or created by uid and listed", async () => {
  const app = await svix.application.getOrCreate({ name: "Acme", uid: "cus_js" });
  const again = await svix.application.getOrCreate({ name: "Acme", uid: "cus_js" });
  assert.equal(again.id, app.id);
  assert.ok(app.createdAt instanceof Date);

  const listed = await svix.application.list({ limit: 250 });
  assert.ok(listed.data.some((row) => row.id === app.id) && listed.done);
});

test("one idempotency key creates one application", async () => {
  const first = await svix.application.create({ name: "Once" }, { idempotencyKey: "js-once" });
  const again = await svix.application.create({ name: "Once" }, { idempotencyKey: "js-once" });
  assert.equal(again.id, first.id);
  await assert.rejects(svix.application.create({ name: "Other" }, { idempotencyKey: "js-once" }),
    (error) => error.code === 409);
});

test("a message is sent, read and its attempts listed", async () => {
  const app = await svix.application.create({ name: "Messages" });
  const endpoint = await svix.endpoint.create(app.id, { url: "https://example.svix.com/", uid: "main" });
  const message = await svix.message.create(app.id, { eventType: "order.paid", eventId: "evt-js-1", payload: { n: 1 } });
  assert.equal(message.eventId, "evt-js-1");

  const read = await svix.message.get(app.id, "evt-js-1", { withContent: true });
  assert.equal(read.id, message.id);
  assert.deepEqual(read.payload, { n: 1 });
  const bare = await svix.message.get(app.id, message.id); // this SDK asks for no content by default
  assert.deepEqual(bare.payload, {});
  const endpoints = await svix.endpoint.list(app.id);
  assert.deepEqual(endpoints.data.map((row) => row.id), [endpoint.id]);
  const attempts = await svix.messageAttempt.listByMsg(app.id, message.id);
  assert.ok(Array.isArray(attempts.data));
  const secret = await svix.endpoint.getSecret(app.id, "main");
  assert.match(secret.key, /^whsec_/);
});

test("errors are the Svix API's: a JSON code and detail", async () => {
  await assert.rejects(svix.application.get("app_unknown"), (error) => {
    assert.equal(error.code, 404);
    assert.equal(error.body.code, "not_found");
    return true;
  });
});
