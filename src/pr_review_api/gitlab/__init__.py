"""GitLab merge requests (specification §17): URLs, the REST v4 client, checkout, publishing."""
