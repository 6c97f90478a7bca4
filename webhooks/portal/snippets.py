"""How to verify an endpoint's signatures with the official Standard Webhooks libraries: one
snippet per language, each reading the secret from ``WEBHOOK_SECRET`` (the portal never puts a
secret into a snippet) and verifying the raw body with the request's headers."""

from __future__ import annotations

from dataclasses import dataclass


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
