"""The webhook domain the API and the workers share: the outbox, URL rules, requests, notices, relay wake-ups, backlog."""
