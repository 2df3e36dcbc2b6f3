"""What every upstream client shares: the capped body reader (`body`) and the pooled API
client the forges build on (`api_client`)."""
