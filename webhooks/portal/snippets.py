"""How to verify an endpoint's signatures with the official Standard Webhooks libraries: one
snippet per language, each reading the secret from ``WEBHOOK_SECRET`` (the portal never puts a
secret into a snippet) and verifying the raw body with the request's headers.

A destination that is not an HTTP receiver carries the same three values elsewhere: a RabbitMQ
message as AMQP headers, a Redis stream entry as fields (``webhooks.delivery.destinations``);
``guides_for`` picks the guide of each kind an endpoint's URLs name (its ``url``, its
``fallback_url``).
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from webhooks.delivery.destinations.base import scheme_of


@dataclass(frozen=True)
class Snippet:
    language: str
    install: str
    code: str


SNIPPETS = (
    Snippet("Python", "pip install standardwebhooks", """\
import os
from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])  # whsec_…

def handle(body: bytes, headers: dict[str, str]):
    try:
        event = webhook.verify(body, headers)  # the raw body, before parsing it
    except WebhookVerificationError:
        return 400
    print(event["type"], event["data"])
    return 204
"""),
    Snippet("JavaScript", "npm install standardwebhooks", """\
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.WEBHOOK_SECRET); // whsec_…

// Express: app.post("/webhooks", express.raw({ type: "application/json" }), handle)
function handle(req, res) {
  try {
    const event = webhook.verify(req.body.toString("utf8"), req.headers);
    console.log(event.type, event.data);
    res.sendStatus(204);
  } catch (err) {
    res.sendStatus(400);
  }
}
"""),
    Snippet("Go", "go get github.com/standard-webhooks/standard-webhooks/libraries", """\
package main

import (
	"io"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	webhook, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET")) // whsec_…
	if err != nil {
		panic(err)
	}
	http.HandleFunc("/webhooks", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(body, r.Header); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	http.ListenAndServe(":9000", nil)
}
"""),
    Snippet("Ruby", "gem install standardwebhooks", """\
require "standardwebhooks"

webhook = StandardWebhooks::Webhook.new(ENV.fetch("WEBHOOK_SECRET")) # whsec_…

# Rails: in a controller action
payload = request.raw_post
headers = request.headers.to_h.slice("HTTP_WEBHOOK_ID", "HTTP_WEBHOOK_TIMESTAMP", "HTTP_WEBHOOK_SIGNATURE")
  .transform_keys { |key| key.delete_prefix("HTTP_").downcase.tr("_", "-") }
begin
  event = webhook.verify(payload, headers)
  head :no_content
rescue StandardWebhooks::WebhookVerificationError
  head :bad_request
end
"""),
    Snippet("PHP", "composer require standard-webhooks/standard-webhooks", """\
<?php
require __DIR__ . '/vendor/autoload.php';

$webhook = new \\StandardWebhooks\\Webhook(getenv('WEBHOOK_SECRET')); // whsec_…

$payload = file_get_contents('php://input');
$headers = [
    'webhook-id' => $_SERVER['HTTP_WEBHOOK_ID'] ?? '',
    'webhook-timestamp' => $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '',
    'webhook-signature' => $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '',
];
try {
    $event = $webhook->verify($payload, $headers);
    http_response_code(204);
} catch (\\Exception $e) {
    http_response_code(400);
}
"""),
)


@dataclass(frozen=True)
class Guide:
    """How to verify what one kind of destination receives."""

    title: str
    intro: Markup
    snippets: tuple[Snippet, ...]


HTTP_GUIDE = Guide("An HTTP receiver", Markup(
    'Each request carries the headers <code>webhook-id</code>, <code>webhook-timestamp</code> and '
    '<code>webhook-signature</code> (<a href="https://www.standardwebhooks.com/">Standard Webhooks</a>). Verify '
    'them with the official library for your language, on the raw body, before you parse it. Start your receiver '
    'with the secret in <code>WEBHOOK_SECRET</code>.'), SNIPPETS)

AMQP_GUIDE = Guide("A RabbitMQ exchange", Markup(
    'Each message carries the AMQP headers <code>webhook-id</code>, <code>webhook-timestamp</code> and '
    '<code>webhook-signature</code> (<a href="https://www.standardwebhooks.com/">Standard Webhooks</a>), its body is '
    'the exact bytes signed, and its <code>message_id</code> is the event id (drop a message whose id you have '
    'seen: a message may come twice). Verify the body with the headers, as an HTTP receiver would, with the '
    'secret in <code>WEBHOOK_SECRET</code>.'), (Snippet("Python", "pip install standardwebhooks pika", """\
import os
import pika
from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])  # whsec_…

def handle(channel, method, properties, body: bytes):
    headers = {name: str(value) for name, value in (properties.headers or {}).items()}
    try:
        event = webhook.verify(body, headers)  # webhook-id, webhook-timestamp, webhook-signature
    except WebhookVerificationError:
        channel.basic_reject(method.delivery_tag, requeue=False)
        return
    print(event["type"], event["data"])
    channel.basic_ack(method.delivery_tag)

connection = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
channel = connection.channel()
channel.basic_consume("your-queue", handle)
channel.start_consuming()
"""),))

REDIS_GUIDE = Guide("A Redis stream", Markup(
    'Each stream entry has the fields <code>id</code> (the event id), <code>type</code>, <code>timestamp</code>, '
    '<code>signature</code> and <code>body</code> (the exact bytes signed). Verify it as an HTTP request whose '
    'headers <code>webhook-id</code>, <code>webhook-timestamp</code> and <code>webhook-signature</code> are '
    '<code>id</code>, <code>timestamp</code> and <code>signature</code> (<a href="https://www.standardwebhooks.com/">'
    'Standard Webhooks</a>), with the secret in <code>WEBHOOK_SECRET</code>; drop an entry whose id you have seen.'),
    (Snippet("Python", "pip install standardwebhooks redis", """\
import os
import redis
from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])  # whsec_…
stream = redis.Redis.from_url(os.environ["REDIS_URL"])

last = "0"
while True:
    for _, entries in stream.xread({"your-stream": last}, block=5000) or []:
        for last, fields in entries:
            headers = {"webhook-id": fields[b"id"].decode(), "webhook-timestamp": fields[b"timestamp"].decode(),
                       "webhook-signature": fields[b"signature"].decode()}
            try:
                event = webhook.verify(fields[b"body"], headers)
            except WebhookVerificationError:
                continue
            print(event["type"], event["data"])
"""),))

#: The guide of each scheme (a kind with nothing to verify has none).
GUIDES = {"http": HTTP_GUIDE, "https": HTTP_GUIDE, "amqp": AMQP_GUIDE, "amqps": AMQP_GUIDE, "redis": REDIS_GUIDE,
          "rediss": REDIS_GUIDE}


def guides_for(*urls: str | None) -> list[Guide]:
    """The guides for what ``urls`` (an endpoint's ``url``, then its ``fallback_url``) receive, each kind once."""
    guides: list[Guide] = []
    for url in urls:
        guide = GUIDES.get(scheme_of(url)) if url else None
        if guide is not None and guide not in guides:
            guides.append(guide)
    return guides
