"""The webhook domain the API and the workers share: the outbox, URL rules, signing, relay wake-ups."""
