"""The API's HTTP plumbing: the app factory, middleware, authentication, validation of requests, errors to responses."""
