"""The bare endpoints the service is measured against: a Flask + Peewee baseline and the floor of a Python process."""
