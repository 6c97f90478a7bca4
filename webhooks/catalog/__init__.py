"""The event-type catalog: event types with a JSON Schema and examples, the validators
compiled from them (reused per schema version), and endpoint filters (compiled once).

``schemas`` checks a schema when it is written and a payload against it, ``filters`` the
Outpost-style filter language, ``operational`` the schemas of the types the service raises,
``store`` the catalog's rows (read and written by the API, the CLI, the console and the
portal), ``registry`` the per-process view ingestion validates against, ``files`` a catalog
as a JSON or YAML file, ``examples`` test events sent to one endpoint.

May import: ``storage``, ``messaging``, ``ingest`` (``examples`` accepts its test event
there) and the shared modules at the top; not the API, the console or the portal, which
call it.
"""
