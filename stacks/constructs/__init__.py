"""One construct per concern: storage, queues, the retry workflow, functions, the API, observability."""
