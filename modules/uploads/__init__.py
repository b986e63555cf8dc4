"""Files given to the agent: uploads, attachments, file types and text extraction."""
